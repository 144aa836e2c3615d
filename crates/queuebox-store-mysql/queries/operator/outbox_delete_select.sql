-- Locking: victims FOR UPDATE SKIP LOCKED, in the chunk's transaction. Isolation: READ COMMITTED.
-- Bulk delete, one chunk, first statement (ADM-9, ADM-20): at most :chunk matching rows of one
-- state (2 sent, 3 dead, mapped to the literal in the file, SCH-9), lowest sequence first,
-- locked until the chunk commits; outbox_delete_ids.sql follows.
-- Filters (ADM-13, ADM-21): a NULL parameter is no filter; an empty JSON array matches nothing.
-- Times travel as microseconds since 1970 (UTC). The error filter is LOCATE against the
-- utf8mb4_bin column, a literal, case-sensitive substring: no LIKE wildcard applies.
SELECT o.`{id}`
FROM `{outbox}` o
WHERE o.`{state}` = CASE :state WHEN 2 THEN 'sent' WHEN 3 THEN 'dead' END
  AND (:ids IS NULL OR o.`{id}` IN (
           SELECT j.v FROM JSON_TABLE(:ids, '$[*]' COLUMNS (v CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) j))
  AND (:topics IS NULL OR o.`{topic}` IN (
           SELECT j.v FROM JSON_TABLE(:topics, '$[*]' COLUMNS (v VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) j))
  AND (:key IS NULL OR o.`{key}` = :key)
  AND (:created_after IS NULL OR o.`{created_at}` > TIMESTAMPADD(MICROSECOND, :created_after, '1970-01-01 00:00:00.000000'))
  AND (:created_before IS NULL OR o.`{created_at}` < TIMESTAMPADD(MICROSECOND, :created_before, '1970-01-01 00:00:00.000000'))
  AND (:error_contains IS NULL OR LOCATE(:error_contains, o.`{last_error}`) > 0)
ORDER BY o.`{sequence}`
LIMIT :chunk
FOR UPDATE SKIP LOCKED
