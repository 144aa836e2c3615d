-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Bulk delete, one chunk (ADM-9, ADM-24): at most :chunk rows of the given state (2 processed,
-- 3 dead), oldest (created_at, id) first; the DELETE repeats the state condition.
-- Filters (ADM-13): a NULL parameter is no filter; a JSON array (ids, topics, sources) that is
-- empty matches nothing. Times are in the fixed text form, so text order is time order. The
-- error filter is instr(), a literal, case-sensitive substring: no LIKE wildcard applies.
DELETE FROM "{inbox}"
WHERE "{id}" IN (
    SELECT i."{id}"
    FROM "{inbox}" i
    WHERE i."{state}" = CASE :state WHEN 2 THEN 'processed' WHEN 3 THEN 'dead' END
      AND (:ids IS NULL OR i."{id}" IN (SELECT j.value FROM json_each(:ids) j))
      AND (:sources IS NULL OR i."{source}" IN (SELECT j.value FROM json_each(:sources) j))
      AND (:consumption IS NULL
           OR i."{consumption}" = CASE :consumption WHEN 0 THEN 'push' WHEN 1 THEN 'pull' END)
      AND (:event_type IS NULL OR i."{event_type}" = :event_type)
      AND (:aggregate_id IS NULL OR i."{aggregate_id}" = :aggregate_id)
      AND (:idempotency_key IS NULL OR i."{idempotency_key}" = :idempotency_key)
      AND (:created_after IS NULL OR i."{created_at}" > :created_after)
      AND (:created_before IS NULL OR i."{created_at}" < :created_before)
      AND (:error_contains IS NULL OR instr(i."{last_error}", :error_contains) > 0)
    ORDER BY i."{created_at}", i."{id}"
    LIMIT :chunk)
  AND "{state}" = CASE :state WHEN 2 THEN 'processed' WHEN 3 THEN 'dead' END
