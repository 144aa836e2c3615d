-- Locking: victims FOR UPDATE SKIP LOCKED, in the batch's transaction. Isolation: READ COMMITTED.
-- Outbox retention by age (RET-2..4, RET-6, RET-8), first statement: at most :batch sent or
-- dead rows older than the age by updated_at, oldest first (idx_outbox_state_updated), locked
-- FOR UPDATE SKIP LOCKED so concurrent runs of several replicas split the work instead of
-- waiting; operator/outbox_delete_ids.sql deletes them in the same short transaction and
-- repeats the state guard, so a row replayed meanwhile is kept. Never pending or processing.
-- :max_age_ms = maximum age in ms, :batch = batch size.
SELECT d.`{id}`
FROM `{outbox}` d
WHERE d.`{state}` IN ('sent', 'dead')
  AND d.`{updated_at}` < UTC_TIMESTAMP(6) - INTERVAL :max_age_ms * 1000 MICROSECOND
ORDER BY d.`{updated_at}`
LIMIT :batch
FOR UPDATE SKIP LOCKED
