-- Locking: none, read only. Isolation: READ COMMITTED.
-- The state of one inbox row, after a guarded single delete removed nothing (ADM-23).
SELECT i.`{state}` FROM `{inbox}` i WHERE i.`{id}` = :id
