-- Version 4: add inbox raw_body
-- The body bytes exactly as received, for a source with storeRawBody: true; NULL otherwise.
-- MySQL has no ADD COLUMN IF NOT EXISTS: information_schema decides (schema.md SCH-45).
SET @queuebox_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE inbox ADD COLUMN raw_body LONGBLOB NULL', 'DO 0')
    FROM information_schema.columns
    WHERE table_schema = DATABASE() AND table_name = 'inbox' AND column_name = 'raw_body');
PREPARE queuebox_ddl FROM @queuebox_ddl;
EXECUTE queuebox_ddl;
DEALLOCATE PREPARE queuebox_ddl;
