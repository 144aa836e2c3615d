-- Locking: none, read only. Isolation: a read snapshot (WAL).
-- Outbox rows of one state, newest first (ADM-17), keyset-paged on (created_at, id) (ADM-11);
-- claim_token is never read (ADM-12).
-- Filters (ADM-13): a NULL parameter is no filter; a JSON array (ids, topics, sources) that is
-- empty matches nothing. Times are in the fixed text form, so text order is time order. The
-- error filter is instr(), a literal, case-sensitive substring: no LIKE wildcard applies.
-- :state = 0 pending, 1 processing, 2 sent, 3 dead; :after_created_at, :after_id = the cursor
-- or NULL; :limit = page size.
SELECT o."{id}", o."{topic}", NULLIF(o."{key}", ''), o."{aggregate_type}", o."{state}",
       o."{attempt}", o."{max_attempts}", o."{scheduled_at}", o."{created_at}",
       o."{updated_at}", o."{last_error}"
FROM "{outbox}" o
WHERE o."{state}" = CASE :state
    WHEN 0 THEN 'pending' WHEN 1 THEN 'processing' WHEN 2 THEN 'sent' WHEN 3 THEN 'dead' END
      AND (:ids IS NULL OR o."{id}" IN (SELECT j.value FROM json_each(:ids) j))
      AND (:topics IS NULL OR o."{topic}" IN (SELECT j.value FROM json_each(:topics) j))
      AND (:key IS NULL OR o."{key}" = :key)
      AND (:created_after IS NULL OR o."{created_at}" > :created_after)
      AND (:created_before IS NULL OR o."{created_at}" < :created_before)
      AND (:error_contains IS NULL OR instr(o."{last_error}", :error_contains) > 0)
  AND (:after_created_at IS NULL
       OR (o."{created_at}", o."{id}") < (:after_created_at, :after_id))
ORDER BY o."{created_at}" DESC, o."{id}" DESC
LIMIT :limit
