-- Locking: the new history row, under the migration lock. Isolation: READ COMMITTED, in the transaction of its version.
-- Runs in the transaction of its version (SCH-46), under the migration lock.
INSERT INTO queuebox_schema_history (version, description, kind, checksum, queuebox_version, duration_ms)
VALUES (:version, :description, :kind, :checksum, :queuebox_version, :duration_ms)
