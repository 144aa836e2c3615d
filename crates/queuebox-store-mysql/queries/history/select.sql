-- Locking: none, read under the migration lock. Isolation: READ COMMITTED.
-- Read under the migration lock (SCH-47), so no other QueueBox writes the history meanwhile.
SELECT version, description, kind, checksum
FROM queuebox_schema_history
ORDER BY version
