-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Requeue one chunk (RLY-17, ADM-9, ADM-25): at most :chunk dead rows, oldest (created_at, id)
-- first, back to pending with attempt 0 and scheduled_at = now, no error, processed time,
-- claim or lease. The UPDATE repeats the state condition.
-- Filters (ADM-13): a NULL parameter is no filter; a JSON array (ids, topics, sources) that is
-- empty matches nothing. Times are in the fixed text form, so text order is time order. The
-- error filter is instr(), a literal, case-sensitive substring: no LIKE wildcard applies.
UPDATE "{inbox}"
SET "{state}" = 'pending',
    "{attempt}" = 0,
    "{last_error}" = NULL,
    "{scheduled_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
    "{processed_at}" = NULL,
    "{claimed_at}" = NULL,
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL
WHERE "{id}" IN (
    SELECT i."{id}"
    FROM "{inbox}" i
    WHERE i."{state}" = 'dead'
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
  AND "{state}" = 'dead'
