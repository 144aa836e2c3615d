-- Locking: none. Isolation: READ COMMITTED.
-- Schema guard read, no locks: which versions the history records (SCH-61).
SELECT version
FROM queuebox_schema_history
ORDER BY version
