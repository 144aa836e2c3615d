-- Locking: none, read only. Isolation: a read snapshot (WAL).
-- Inbox rows of one state, newest first (ADM-21), keyset-paged on (created_at, id) (ADM-11);
-- claim_token is never read.
-- Filters (ADM-13): a NULL parameter is no filter; a JSON array (ids, topics, sources) that is
-- empty matches nothing. Times are in the fixed text form, so text order is time order. The
-- error filter is instr(), a literal, case-sensitive substring: no LIKE wildcard applies.
-- :state = 0 pending, 1 processing, 2 processed, 3 dead; :consumption = 0 push, 1 pull, or NULL;
-- :after_created_at, :after_id = the cursor or NULL; :limit = page size.
SELECT i."{id}", i."{source}", i."{idempotency_key}", i."{aggregate_id}", i."{event_type}",
       i."{consumption}", i."{state}", i."{attempt}", i."{correlation_id}",
       i."{scheduled_at}", i."{created_at}", i."{processed_at}", i."{last_error}"
FROM "{inbox}" i
WHERE i."{state}" = CASE :state
    WHEN 0 THEN 'pending' WHEN 1 THEN 'processing' WHEN 2 THEN 'processed' WHEN 3 THEN 'dead' END
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
  AND (:after_created_at IS NULL
       OR (i."{created_at}", i."{id}") < (:after_created_at, :after_id))
ORDER BY i."{created_at}" DESC, i."{id}" DESC
LIMIT :limit
