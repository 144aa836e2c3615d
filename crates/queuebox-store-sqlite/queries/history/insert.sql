-- Locking: the write lock of the migration transaction. Isolation: serializable.
-- Runs in the savepoint of its version (SCH-46), so the version and its row commit together.
INSERT INTO queuebox_schema_history (version, description, kind, checksum, queuebox_version, duration_ms)
VALUES (:version, :description, :kind, :checksum, :queuebox_version, :duration_ms)
