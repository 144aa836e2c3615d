-- Locking: none, read only. Isolation: READ COMMITTED.
-- Operator list of inbox rows (ADM-11, ADM-21): the rows of one state, newest first by
-- (created_at, id), after the keyset cursor (:after_created_at NULL on the first page), read
-- backwards from idx_inbox_state_created. The state is a code mapped to its literal in the
-- file (SCH-9): 0 pending, 1 processing, 2 processed, 3 dead; consumption likewise (0 push,
-- 1 pull). The store asks for one row more than the page, to know whether another follows.
-- Filters (ADM-13, ADM-21): a NULL parameter is no filter; an empty JSON array matches nothing.
-- Times travel as microseconds since 1970 (UTC). The error filter is LOCATE against the
-- utf8mb4_bin column, a literal, case-sensitive substring: no LIKE wildcard applies.
SELECT i.`{id}` AS id, i.`{source}` AS source,
       i.`{idempotency_key}` AS idempotency_key, i.`{aggregate_id}` AS aggregate_id,
       i.`{event_type}` AS event_type, i.`{consumption}` AS consumption,
       i.`{state}` AS state, i.`{attempt}` AS attempt,
       i.`{correlation_id}` AS correlation_id,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', i.`{scheduled_at}`) AS scheduled_at,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', i.`{created_at}`) AS created_at,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', i.`{processed_at}`) AS processed_at,
       i.`{last_error}` AS last_error
FROM `{inbox}` i
WHERE i.`{state}` = CASE :state
    WHEN 0 THEN 'pending' WHEN 1 THEN 'processing' WHEN 2 THEN 'processed' WHEN 3 THEN 'dead' END
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
  AND (:after_created_at IS NULL
       OR (i.`{created_at}`, i.`{id}`) < (TIMESTAMPADD(MICROSECOND, :after_created_at, '1970-01-01 00:00:00.000000'), :after_id))
  -- The same bound on created_at alone, which the row comparison implies: MariaDB starts the
  -- index range there instead of reading every row of the state newer than the cursor.
  AND (:after_created_at IS NULL
       OR i.`{created_at}` <= TIMESTAMPADD(MICROSECOND, :after_created_at, '1970-01-01 00:00:00.000000'))
ORDER BY i.`{created_at}` DESC, i.`{id}` DESC
LIMIT :limit
