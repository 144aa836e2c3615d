-- Locking: none, read only. Isolation: READ COMMITTED.
-- Operator list of inbox rows (ADM-11, ADM-21): the rows of one state, newest first by
-- (created_at, id), after the keyset cursor (:after_created_at NULL on the first page), read
-- backwards from idx_inbox_state_created. The state is a code mapped to its literal in the
-- file (SCH-9): 0 pending, 1 processing, 2 processed, 3 dead. The store asks for one row more
-- than the page, to know whether another page follows.
-- Filters (ADM-21): a NULL parameter is no filter; an empty array matches nothing. consumption
-- is a code mapped to its literal (0 push, 1 pull), as states are (SCH-9). The error filter is
-- strpos, a literal substring: no LIKE wildcard or escape character applies.
SELECT i."{id}" AS id, i."{source}"::text AS source,
       i."{idempotency_key}"::text AS idempotency_key, i."{aggregate_id}"::text AS aggregate_id,
       i."{event_type}"::text AS event_type, i."{consumption}"::text AS consumption,
       i."{state}"::text AS state, i."{attempt}" AS attempt,
       i."{correlation_id}"::text AS correlation_id, i."{scheduled_at}" AS scheduled_at,
       i."{created_at}" AS created_at, i."{processed_at}" AS processed_at,
       i."{last_error}" AS last_error
FROM "{inbox}" i
WHERE i."{state}" = CASE :state::int4
    WHEN 0 THEN 'pending' WHEN 1 THEN 'processing' WHEN 2 THEN 'processed' WHEN 3 THEN 'dead' END
  AND (:ids::uuid[] IS NULL OR i."{id}" = ANY (:ids::uuid[]))
  AND (:sources::text[] IS NULL OR i."{source}" = ANY (:sources::text[]))
  AND (:consumption::int4 IS NULL
       OR i."{consumption}" = CASE :consumption::int4 WHEN 0 THEN 'push' WHEN 1 THEN 'pull' END)
  AND (:event_type::text IS NULL OR i."{event_type}" = :event_type::text)
  AND (:aggregate_id::text IS NULL OR i."{aggregate_id}" = :aggregate_id::text)
  AND (:idempotency_key::text IS NULL OR i."{idempotency_key}" = :idempotency_key::text)
  AND (:created_after::timestamptz IS NULL OR i."{created_at}" > :created_after::timestamptz)
  AND (:created_before::timestamptz IS NULL OR i."{created_at}" < :created_before::timestamptz)
  AND (:error_contains::text IS NULL OR strpos(i."{last_error}", :error_contains::text) > 0)
  AND (:after_created_at::timestamptz IS NULL
       OR (i."{created_at}", i."{id}") < (:after_created_at::timestamptz, :after_id::uuid))
ORDER BY i."{created_at}" DESC, i."{id}" DESC
LIMIT :limit::bigint
