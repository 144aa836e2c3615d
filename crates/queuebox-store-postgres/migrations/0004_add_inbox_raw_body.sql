-- Version 4: add inbox raw_body
-- The body bytes exactly as received, for a source with storeRawBody: true; NULL otherwise.
ALTER TABLE inbox ADD COLUMN IF NOT EXISTS raw_body BYTEA;
