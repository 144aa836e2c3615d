-- Locking: candidates FOR UPDATE SKIP LOCKED, then their row locks; the UPDATE repeats the state guard. Isolation: READ COMMITTED.
-- Requeue, one chunk (RLY-17, ADM-9, ADM-25): at most :chunk matching dead rows, oldest first
-- by (created_at, id) from idx_inbox_state_created, back to pending, in one short statement;
-- the store repeats it until a chunk moves fewer than it may. A row that left dead after the
-- read fails the guard and is not counted. id, source, idempotency_key, consumption, payload
-- and headers stay; a push row is forwarded again, a pull row claimed again (RLY-18).
-- Filters (ADM-21): a NULL parameter is no filter; an empty array matches nothing. consumption
-- is a code mapped to its literal (0 push, 1 pull), as states are (SCH-9). The error filter is
-- strpos, a literal substring: no LIKE wildcard or escape character applies.
WITH candidates AS MATERIALIZED (
    SELECT i."{id}" AS id
    FROM "{inbox}" i
    WHERE i."{state}" = 'dead'
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
    ORDER BY i."{created_at}", i."{id}"
    LIMIT :chunk::bigint
    FOR UPDATE OF i SKIP LOCKED
)
UPDATE "{inbox}" t
SET "{state}" = 'pending',
    "{attempt}" = 0,
    "{last_error}" = NULL,
    "{scheduled_at}" = clock_timestamp(),
    "{processed_at}" = NULL,
    "{claimed_at}" = NULL,
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL
FROM candidates c
WHERE t."{id}" = c.id AND t."{state}" = 'dead'
