-- Locking: read under the write lock of the migration transaction. Isolation: serializable.
-- Read after BEGIN IMMEDIATE (SCH-47), so no other process writes the history meanwhile.
SELECT version, description, kind, checksum
FROM queuebox_schema_history
ORDER BY version
