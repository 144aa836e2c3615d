-- Locking: none, read only. Isolation: READ COMMITTED.
-- The state of one outbox row, after a guarded single delete removed nothing (ADM-19).
SELECT o.`{state}` FROM `{outbox}` o WHERE o.`{id}` = :id
