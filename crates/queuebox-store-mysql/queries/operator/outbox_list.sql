-- Locking: none, read only. Isolation: READ COMMITTED.
-- Operator list of outbox rows (ADM-11, ADM-16, ADM-17): the rows of one state, newest first by
-- (created_at, id), after the keyset cursor (:after_created_at NULL on the first page). The
-- state is a code mapped to its literal in the file (SCH-9): 0 pending, 1 processing, 2 sent,
-- 3 dead. The store asks for one row more than the page, to know whether another page follows.
-- Index: idx_outbox_state_created (state, created_at, id, topic) of migration 5, read
-- backwards from the cursor: a page reads about one page of rows, however many the state holds.
-- Filters (ADM-13, ADM-21): a NULL parameter is no filter; an empty JSON array matches nothing.
-- Times travel as microseconds since 1970 (UTC). The error filter is LOCATE against the
-- utf8mb4_bin column, a literal, case-sensitive substring: no LIKE wildcard applies.
SELECT o.`{id}` AS id, o.`{topic}` AS topic, NULLIF(o.`{key}`, '') AS k,
       o.`{aggregate_type}` AS aggregate_type, o.`{state}` AS state,
       o.`{attempt}` AS attempt, o.`{max_attempts}` AS max_attempts,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', o.`{scheduled_at}`) AS scheduled_at,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', o.`{created_at}`) AS created_at,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', o.`{updated_at}`) AS updated_at, o.`{last_error}` AS last_error
FROM `{outbox}` o
WHERE o.`{state}` = CASE :state
    WHEN 0 THEN 'pending' WHEN 1 THEN 'processing' WHEN 2 THEN 'sent' WHEN 3 THEN 'dead' END
  AND (:ids IS NULL OR o.`{id}` IN (
           SELECT j.v FROM JSON_TABLE(:ids, '$[*]' COLUMNS (v CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) j))
  AND (:topics IS NULL OR o.`{topic}` IN (
           SELECT j.v FROM JSON_TABLE(:topics, '$[*]' COLUMNS (v VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) j))
  AND (:key IS NULL OR o.`{key}` = :key)
  AND (:created_after IS NULL OR o.`{created_at}` > TIMESTAMPADD(MICROSECOND, :created_after, '1970-01-01 00:00:00.000000'))
  AND (:created_before IS NULL OR o.`{created_at}` < TIMESTAMPADD(MICROSECOND, :created_before, '1970-01-01 00:00:00.000000'))
  AND (:error_contains IS NULL OR LOCATE(:error_contains, o.`{last_error}`) > 0)
  AND (:after_created_at IS NULL
       OR (o.`{created_at}`, o.`{id}`) < (TIMESTAMPADD(MICROSECOND, :after_created_at, '1970-01-01 00:00:00.000000'), :after_id))
  -- The same bound on created_at alone, which the row comparison implies: MariaDB starts the
  -- index range there instead of reading every row of the state newer than the cursor.
  AND (:after_created_at IS NULL
       OR o.`{created_at}` <= TIMESTAMPADD(MICROSECOND, :after_created_at, '1970-01-01 00:00:00.000000'))
ORDER BY o.`{created_at}` DESC, o.`{id}` DESC
LIMIT :limit
