-- Locking: candidates FOR UPDATE SKIP LOCKED, then their row locks; the UPDATE repeats the state guard. Isolation: READ COMMITTED.
-- Replay, one chunk (OUT-48..52, ADM-9, ADM-15): at most :chunk matching sent or dead rows,
-- lowest sequence first, back to pending, in one short statement; the store repeats it until
-- a chunk moves fewer than it may. Rows another transaction holds (a retention delete) are left
-- to it; a row that left sent/dead after the read fails the guard and is not counted. The
-- clock is read once, so scheduled_at = updated_at. id,
-- sequence, topic, key, payload, headers, aggregate_type and max_attempts stay (OUT-52).
-- Index: the primary key for an id filter; otherwise the sent and dead rows are read in
-- sequence order (no index holds (state, sequence)).
-- Filters (ADM-13): a NULL parameter is no filter; an empty array matches nothing. The error
-- filter is strpos, a literal substring: no LIKE wildcard or escape character applies.
WITH candidates AS MATERIALIZED (
    SELECT o."{id}" AS id
    FROM "{outbox}" o
    WHERE o."{state}" IN ('sent', 'dead')
      AND (:ids::uuid[] IS NULL OR o."{id}" = ANY (:ids::uuid[]))
      AND (:topics::text[] IS NULL OR o."{topic}" = ANY (:topics::text[]))
      AND (:key::text IS NULL OR o."{key}" = :key::text)
      AND (:created_after::timestamptz IS NULL OR o."{created_at}" > :created_after::timestamptz)
      AND (:created_before::timestamptz IS NULL OR o."{created_at}" < :created_before::timestamptz)
      AND (:error_contains::text IS NULL OR strpos(o."{last_error}", :error_contains::text) > 0)
    ORDER BY o."{sequence}"
    LIMIT :chunk::bigint
    FOR UPDATE OF o SKIP LOCKED
),
clock AS MATERIALIZED (SELECT clock_timestamp() AS at)
UPDATE "{outbox}" t
SET "{state}" = 'pending',
    "{attempt}" = 0,
    "{last_error}" = NULL,
    "{scheduled_at}" = k.at,
    "{updated_at}" = k.at,
    "{claimed_at}" = NULL,
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL
FROM candidates c, clock k
WHERE t."{id}" = c.id AND t."{state}" IN ('sent', 'dead')
