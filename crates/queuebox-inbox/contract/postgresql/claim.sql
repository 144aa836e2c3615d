-- Locking: no claim lock; FOR UPDATE OF l SKIP LOCKED on base-table rows, and the UPDATE repeats the predicate (re-checked on the latest row version). Isolation: READ COMMITTED, alone in its own short transaction, committed before any handler starts (PULL-18, PULL-21).
WITH candidates AS (
    (SELECT c."{id}", c."{aggregate_id}", c."{scheduled_at}", c."{created_at}"
       FROM "{inbox}" c
      WHERE c."{consumption}" = 'pull' AND c."{source}" = :source
        AND c."{state}" = 'pending' AND c."{scheduled_at}" <= clock_timestamp()
      ORDER BY c."{scheduled_at}", c."{created_at}", c."{id}"
      LIMIT :cand_limit)
    UNION ALL
    (SELECT c."{id}", c."{aggregate_id}", c."{scheduled_at}", c."{created_at}"
       FROM "{inbox}" c
      WHERE c."{consumption}" = 'pull' AND c."{source}" = :source
        AND c."{state}" = 'processing' AND c."{lease_expires_at}" <= clock_timestamp()
      ORDER BY c."{scheduled_at}", c."{created_at}", c."{id}"
      LIMIT :cand_limit)
),
ready AS (
    SELECT r."{id}", r."{aggregate_id}", r."{scheduled_at}", r."{created_at}",
           row_number() OVER (
               PARTITION BY COALESCE(r."{aggregate_id}", '#' || r."{id}"::text)
               ORDER BY r."{scheduled_at}", r."{created_at}", r."{id}") AS rn
      FROM candidates r
),
eligible AS (
    SELECT e."{id}"
      FROM ready e
     WHERE e.rn = 1
       AND (e."{aggregate_id}" IS NULL OR NOT EXISTS (
            SELECT 1 FROM "{inbox}" b
             WHERE b."{consumption}" = 'pull' AND b."{source}" = :source
               AND b."{aggregate_id}" = e."{aggregate_id}"
               AND b."{state}" = 'processing' AND b."{lease_expires_at}" > clock_timestamp()))
     ORDER BY e."{scheduled_at}", e."{created_at}", e."{id}"
     LIMIT :batch
),
locked AS (
    SELECT l."{id}"
      FROM "{inbox}" l
      JOIN eligible e ON e."{id}" = l."{id}"
     WHERE l."{consumption}" = 'pull' AND l."{source}" = :source
       AND ((l."{state}" = 'pending' AND l."{scheduled_at}" <= clock_timestamp())
         OR (l."{state}" = 'processing' AND l."{lease_expires_at}" <= clock_timestamp()))
       AND (l."{aggregate_id}" IS NULL OR NOT EXISTS (
            SELECT 1 FROM "{inbox}" b
             WHERE b."{consumption}" = 'pull' AND b."{source}" = :source
               AND b."{aggregate_id}" = l."{aggregate_id}"
               AND b."{state}" = 'processing' AND b."{lease_expires_at}" > clock_timestamp()))
       FOR UPDATE OF l SKIP LOCKED
)
UPDATE "{inbox}" t
   SET "{state}" = 'processing',
       "{claim_token}" = :token,
       "{claimed_at}" = clock_timestamp(),
       "{lease_expires_at}" = clock_timestamp() + :lease_ms * INTERVAL '1 millisecond'
  FROM locked k
 WHERE t."{id}" = k."{id}"
   AND t."{consumption}" = 'pull' AND t."{source}" = :source
       AND ((t."{state}" = 'pending' AND t."{scheduled_at}" <= clock_timestamp())
         OR (t."{state}" = 'processing' AND t."{lease_expires_at}" <= clock_timestamp()))
   AND (t."{aggregate_id}" IS NULL OR NOT EXISTS (
            SELECT 1 FROM "{inbox}" b
             WHERE b."{consumption}" = 'pull' AND b."{source}" = :source
               AND b."{aggregate_id}" = t."{aggregate_id}"
               AND b."{state}" = 'processing' AND b."{lease_expires_at}" > clock_timestamp()))
RETURNING t."{id}", t."{source}", t."{idempotency_key}", t."{aggregate_id}", t."{event_type}",
          t."{payload}", t."{attempt}", t."{correlation_id}", t."{headers}",
          t."{scheduled_at}", t."{created_at}"
