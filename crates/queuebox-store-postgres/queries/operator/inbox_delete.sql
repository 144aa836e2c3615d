-- Locking: victims FOR UPDATE SKIP LOCKED, then deleted; the DELETE repeats the state guard. Isolation: READ COMMITTED.
-- Bulk delete, one chunk (ADM-9, ADM-24): at most :chunk matching rows of one state (2
-- processed, 3 dead, mapped to the literal in the file, SCH-9), oldest first by (created_at,
-- id) from idx_inbox_state_created. A row that changed state after the read (a requeue) fails
-- the guard and stays.
-- Filters (ADM-21): a NULL parameter is no filter; an empty array matches nothing. consumption
-- is a code mapped to its literal (0 push, 1 pull), as states are (SCH-9). The error filter is
-- strpos, a literal substring: no LIKE wildcard or escape character applies.
WITH victims AS MATERIALIZED (
    SELECT i."{id}" AS id
    FROM "{inbox}" i
    WHERE i."{state}" = CASE :state::int4 WHEN 2 THEN 'processed' WHEN 3 THEN 'dead' END
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
DELETE FROM "{inbox}" d
USING victims v
WHERE d."{id}" = v.id
  AND d."{state}" = CASE :state::int4 WHEN 2 THEN 'processed' WHEN 3 THEN 'dead' END
