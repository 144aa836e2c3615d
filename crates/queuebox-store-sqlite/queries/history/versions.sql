-- Locking: none. Isolation: a read snapshot (WAL).
-- Schema guard read: which versions the history records (SCH-61).
SELECT version
FROM queuebox_schema_history
ORDER BY version
