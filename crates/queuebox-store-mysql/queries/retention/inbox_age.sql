-- Locking: victims FOR UPDATE SKIP LOCKED, in the batch's transaction. Isolation: READ COMMITTED.
-- Inbox retention by age (RET-2..4, RET-6, RET-8, RET-11), first statement: at most :batch
-- processed or dead rows older than the age by created_at, oldest first
-- (idx_inbox_state_created), locked FOR UPDATE SKIP LOCKED so concurrent runs split the work;
-- operator/inbox_delete_ids.sql deletes them in the same short transaction and repeats the
-- state guard, so a row requeued meanwhile is kept. Never pending or processing rows.
-- :max_age_ms = maximum age in ms, :batch = batch size.
SELECT d.`{id}`
FROM `{inbox}` d
WHERE d.`{state}` IN ('processed', 'dead')
  AND d.`{created_at}` < UTC_TIMESTAMP(6) - INTERVAL :max_age_ms * 1000 MICROSECOND
ORDER BY d.`{created_at}`
LIMIT :batch
FOR UPDATE SKIP LOCKED
