-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Bulk delete, one chunk (ADM-9, ADM-20): at most :chunk rows of the given state (2 sent,
-- 3 dead), oldest sequence first; the DELETE repeats the state condition.
-- Filters (ADM-13): a NULL parameter is no filter; a JSON array (ids, topics, sources) that is
-- empty matches nothing. Times are in the fixed text form, so text order is time order. The
-- error filter is instr(), a literal, case-sensitive substring: no LIKE wildcard applies.
DELETE FROM "{outbox}"
WHERE "{sequence}" IN (
    SELECT o."{sequence}"
    FROM "{outbox}" o
    WHERE o."{state}" = CASE :state WHEN 2 THEN 'sent' WHEN 3 THEN 'dead' END
      AND (:ids IS NULL OR o."{id}" IN (SELECT j.value FROM json_each(:ids) j))
      AND (:topics IS NULL OR o."{topic}" IN (SELECT j.value FROM json_each(:topics) j))
      AND (:key IS NULL OR o."{key}" = :key)
      AND (:created_after IS NULL OR o."{created_at}" > :created_after)
      AND (:created_before IS NULL OR o."{created_at}" < :created_before)
      AND (:error_contains IS NULL OR instr(o."{last_error}", :error_contains) > 0)
    ORDER BY o."{sequence}"
    LIMIT :chunk)
  AND "{state}" = CASE :state WHEN 2 THEN 'sent' WHEN 3 THEN 'dead' END
