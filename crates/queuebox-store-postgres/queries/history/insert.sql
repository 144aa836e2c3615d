-- Runs in the transaction of its version (SCH-46), under the migration lock.
INSERT INTO queuebox_schema_history (version, description, kind, checksum, queuebox_version, duration_ms)
VALUES ($1, $2, $3, $4, $5, $6)
