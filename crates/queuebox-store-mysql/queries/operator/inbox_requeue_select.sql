-- Locking: candidates FOR UPDATE SKIP LOCKED, in the chunk's transaction. Isolation: READ COMMITTED.
-- Requeue, one chunk, first statement (RLY-17, ADM-9, ADM-25): at most :chunk matching dead
-- rows, oldest first by (created_at, id) from idx_inbox_state_created, locked until the chunk
-- commits; inbox_requeue.sql follows.
-- Filters (ADM-13, ADM-21): a NULL parameter is no filter; an empty JSON array matches nothing.
-- Times travel as microseconds since 1970 (UTC). The error filter is LOCATE against the
-- utf8mb4_bin column, a literal, case-sensitive substring: no LIKE wildcard applies.
SELECT i.`{id}`
FROM `{inbox}` i
WHERE i.`{state}` = 'dead'
  AND (:ids IS NULL OR i.`{id}` IN (
           SELECT j.v FROM JSON_TABLE(:ids, '$[*]' COLUMNS (v CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) j))
  AND (:sources IS NULL OR i.`{source}` IN (
           SELECT j.v FROM JSON_TABLE(:sources, '$[*]' COLUMNS (v VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) j))
  AND (:consumption IS NULL
       OR i.`{consumption}` = CASE :consumption WHEN 0 THEN 'push' WHEN 1 THEN 'pull' END)
  AND (:event_type IS NULL OR i.`{event_type}` = :event_type)
  AND (:aggregate_id IS NULL OR i.`{aggregate_id}` = :aggregate_id)
  AND (:idempotency_key IS NULL OR i.`{idempotency_key}` = :idempotency_key)
  AND (:created_after IS NULL OR i.`{created_at}` > TIMESTAMPADD(MICROSECOND, :created_after, '1970-01-01 00:00:00.000000'))
  AND (:created_before IS NULL OR i.`{created_at}` < TIMESTAMPADD(MICROSECOND, :created_before, '1970-01-01 00:00:00.000000'))
  AND (:error_contains IS NULL OR LOCATE(:error_contains, i.`{last_error}`) > 0)
ORDER BY i.`{created_at}`, i.`{id}`
LIMIT :chunk
FOR UPDATE SKIP LOCKED
