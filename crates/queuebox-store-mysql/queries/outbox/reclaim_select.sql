-- Locking: the expired rows nobody else holds, FOR UPDATE SKIP LOCKED, in the reclaim's transaction. Isolation: READ COMMITTED.
-- Reclaim of expired leases (OUT-46/47, SCH-15), first statement: not fenced, it matches expired leases
-- only, so any replica may run it.
-- The expired rows are taken FOR UPDATE SKIP LOCKED, so a row that another session holds (a
-- stalled replica's open transaction, an operator's SELECT ... FOR UPDATE) is left for a later
-- reclaim instead of being waited for: one frozen replica must not stop the poller of every
-- other one. reclaim.sql follows in the same short transaction (MySQL has no LIMIT-free
-- UPDATE ... SKIP LOCKED).
SELECT e.`{id}`
FROM `{outbox}` e
WHERE e.`{state}` = 'processing'
  AND e.`{lease_expires_at}` <= UTC_TIMESTAMP(6)
FOR UPDATE SKIP LOCKED
