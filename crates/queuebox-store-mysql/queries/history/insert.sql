-- Locking: the new history row, under the migration lock. Isolation: READ COMMITTED.
-- Written after the last statement of its version (SCH-46: MySQL commits each DDL statement at
-- once, so a version that failed part-way has no row and runs again from its start), or for
-- every baselined version in one transaction, under the migration lock.
INSERT INTO queuebox_schema_history (version, description, kind, checksum, queuebox_version, duration_ms)
VALUES (:version, :description, :kind, :checksum, :queuebox_version, :duration_ms)
