-- Version 4: add inbox raw_body
-- The body bytes exactly as received, for a source with storeRawBody: true; NULL otherwise.
-- SQLite has no ADD COLUMN IF NOT EXISTS: the migration runner skips this text when the column
-- exists (pragma_table_info), as schema.md SCH-45 asks.
ALTER TABLE inbox ADD COLUMN raw_body BLOB;
