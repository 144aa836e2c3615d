-- Locking: under the claim lock; candidate rows FOR UPDATE SKIP LOCKED, in the claim transaction. Isolation: READ COMMITTED.
-- Relay claim, first statement (RLY-2..5, INB-3), run under the claim lock (claim_lock.sql)
-- in the claim transaction; claim_update.sql follows. MySQL has no UPDATE ... RETURNING and
-- no window function in a locking read, so QueueBox keeps the first row per aggregate of
-- these candidates itself (each NULL aggregate row is its own group), at most :limit rows.
-- Locking: the candidates are taken FOR UPDATE SKIP LOCKED, so a row that another transaction
-- is writing (an operator's requeue) is left for a later claim; the locks last until COMMIT.
-- The busy test (NOT EXISTS) has no locking clause, so it is a plain consistent read: an
-- aggregate with a push row in processing, whatever its lease, is skipped whole; NULL
-- aggregates are never busy. The candidates are read in (scheduled_at, created_at, id) order
-- from idx_inbox_push_pending (consumption, state, scheduled_at, created_at, id), bounded by
-- :cand_limit = min(max(3 x limit, 50), 500) (RLY-4).
-- :sources = JSON array of source names, :cand_limit = candidate bound.
SELECT i.`{id}` AS id, i.`{source}` AS source, i.`{idempotency_key}` AS idempotency_key,
       i.`{aggregate_id}` AS aggregate_id, i.`{event_type}` AS event_type,
       i.`{payload}` AS payload, i.`{headers}` AS headers,
       i.`{correlation_id}` AS correlation_id
FROM `{inbox}` i
WHERE i.`{consumption}` = 'push'
  AND i.`{state}` = 'pending'
  AND i.`{scheduled_at}` <= UTC_TIMESTAMP(6)
  AND i.`{source}` IN (
        SELECT s.name FROM JSON_TABLE(:sources, '$[*]' COLUMNS (
            name VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) s)
  AND (i.`{aggregate_id}` IS NULL
       OR NOT EXISTS (
            SELECT 1 FROM `{inbox}` b
            WHERE b.`{aggregate_id}` = i.`{aggregate_id}`
              AND b.`{state}` = 'processing'
              AND b.`{consumption}` = 'push'))
ORDER BY i.`{scheduled_at}`, i.`{created_at}`, i.`{id}`
LIMIT :cand_limit
FOR UPDATE SKIP LOCKED
