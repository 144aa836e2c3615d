-- Locking: under the claim lock; candidate rows FOR UPDATE SKIP LOCKED. Isolation: READ COMMITTED.
-- Relay claim (RLY-2..5, INB-3). READ COMMITTED, run under the claim lock (claim_lock.sql), so
-- relay claims never overlap and the busy test sees every committed claim.
-- Locking: the candidates are taken FOR UPDATE SKIP LOCKED on the base table, so a row that
-- another transaction is writing is left for a later claim. The busy test and the head test
-- (both NOT EXISTS) take no lock and skip nothing: an aggregate with a push row in processing,
-- whatever its lease, is skipped whole; a row with an earlier pending push row of its aggregate
-- (of a listed source) is no candidate, so when the true head is row-locked (an operator's
-- SELECT ... FOR UPDATE, a stalled replica's open transaction) SKIP LOCKED skips the head and
-- the head test holds back the rows behind it: the aggregate waits, it is never reordered
-- (RLY-3). NULL aggregates are never busy and have no head. The candidates are read in
-- (scheduled_at, created_at, id) order from idx_inbox_push_pending, bounded by :cand_limit =
-- min(max(3 x limit, 50), 500) (RLY-4); then the first row per aggregate is kept (each NULL
-- aggregate row is its own group), and at most :limit rows. The outer SELECT only orders the
-- answer.
-- :limit = rows requested, :cand_limit = candidate bound, :lease_ms = lease in ms (bigint), :sources = source names.
WITH candidates AS MATERIALIZED (
    SELECT i."{id}" AS id, i."{aggregate_id}" AS aggregate_id,
           i."{scheduled_at}" AS scheduled_at, i."{created_at}" AS created_at
    FROM "{inbox}" i
    WHERE i."{consumption}" = 'push'
      AND i."{state}" = 'pending'
      AND i."{scheduled_at}" <= clock_timestamp()
      AND i."{source}" = ANY(:sources::text[])
      AND (i."{aggregate_id}" IS NULL
           OR NOT EXISTS (
                SELECT 1 FROM "{inbox}" b
                WHERE b."{aggregate_id}" = i."{aggregate_id}"
                  AND b."{state}" = 'processing'
                  AND b."{consumption}" = 'push'))
      AND (i."{aggregate_id}" IS NULL
           OR NOT EXISTS (
                SELECT 1 FROM "{inbox}" h
                WHERE h."{aggregate_id}" = i."{aggregate_id}"
                  AND h."{state}" = 'pending'
                  AND h."{consumption}" = 'push'
                  AND h."{source}" = ANY(:sources::text[])
                  AND (h."{scheduled_at}", h."{created_at}", h."{id}")
                      < (i."{scheduled_at}", i."{created_at}", i."{id}")))
    ORDER BY i."{scheduled_at}", i."{created_at}", i."{id}"
    LIMIT :cand_limit::bigint
    FOR UPDATE OF i SKIP LOCKED
),
firsts AS MATERIALIZED (
    SELECT c.id, c.scheduled_at, c.created_at
    FROM (SELECT c.*,
                 row_number() OVER (PARTITION BY c.aggregate_id
                                    ORDER BY c.scheduled_at, c.created_at, c.id) AS rank
          FROM candidates c) c
    WHERE c.aggregate_id IS NULL OR c.rank = 1
    ORDER BY c.scheduled_at, c.created_at, c.id
    LIMIT :limit::bigint
),
claimed AS (
    UPDATE "{inbox}" t
    SET "{state}" = 'processing',
        "{claim_token}" = gen_random_uuid(),
        "{claimed_at}" = clock_timestamp(),
        "{lease_expires_at}" = clock_timestamp() + :lease_ms::bigint * INTERVAL '1 millisecond'
    FROM firsts f
    WHERE t."{id}" = f.id AND t."{state}" = 'pending' AND t."{consumption}" = 'push'
    RETURNING t."{id}" AS id,
              t."{claim_token}" AS claim_token,
              t."{source}"::text AS source,
              t."{idempotency_key}"::text AS idempotency_key,
              t."{aggregate_id}"::text AS aggregate_id,
              t."{event_type}"::text AS event_type,
              t."{payload}"::text AS payload,
              t."{headers}"::text AS headers,
              t."{correlation_id}"::text AS correlation_id,
              f.scheduled_at AS scheduled_at,
              f.created_at AS created_at
)
SELECT id, claim_token, source, idempotency_key, aggregate_id, event_type, payload, headers,
       correlation_id
FROM claimed
ORDER BY scheduled_at, created_at, id
