-- Locking: BEGIN IMMEDIATE (the database's single write lock), this statement, COMMIT; every connection has PRAGMA busy_timeout = 10000, and SQLITE_BUSY after it fails the claim, transiently (PULL-18, PULL-19, pull.md §5.4). The UPDATE repeats readiness and the not-busy check.
WITH candidates AS (
    SELECT * FROM (SELECT c."{id}", c."{aggregate_id}", c."{scheduled_at}", c."{created_at}"
       FROM "{inbox}" c
      WHERE c."{consumption}" = 'pull' AND c."{source}" = :source
        AND c."{state}" = 'pending' AND c."{scheduled_at}" <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
      ORDER BY c."{scheduled_at}", c."{created_at}", c."{id}"
      LIMIT :cand_limit)
    UNION ALL
    SELECT * FROM (SELECT c."{id}", c."{aggregate_id}", c."{scheduled_at}", c."{created_at}"
       FROM "{inbox}" c
      WHERE c."{consumption}" = 'pull' AND c."{source}" = :source
        AND c."{state}" = 'processing' AND c."{lease_expires_at}" <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
      ORDER BY c."{scheduled_at}", c."{created_at}", c."{id}"
      LIMIT :cand_limit)
),
ready AS (
    SELECT r."{id}", r."{aggregate_id}", r."{scheduled_at}", r."{created_at}",
           row_number() OVER (
               PARTITION BY COALESCE(r."{aggregate_id}", '#' || r."{id}")
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
               AND b."{state}" = 'processing' AND b."{lease_expires_at}" > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))
     ORDER BY e."{scheduled_at}", e."{created_at}", e."{id}"
     LIMIT :batch
)
UPDATE "{inbox}" AS t
   SET "{state}" = 'processing',
       "{claim_token}" = :token,
       "{claimed_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
       "{lease_expires_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', :lease_ms / 1000.0))
 WHERE t."{id}" IN (SELECT "{id}" FROM eligible)
   AND t."{consumption}" = 'pull' AND t."{source}" = :source
       AND ((t."{state}" = 'pending' AND t."{scheduled_at}" <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
         OR (t."{state}" = 'processing' AND t."{lease_expires_at}" <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))
   AND (t."{aggregate_id}" IS NULL OR NOT EXISTS (
            SELECT 1 FROM "{inbox}" b
             WHERE b."{consumption}" = 'pull' AND b."{source}" = :source
               AND b."{aggregate_id}" = t."{aggregate_id}"
               AND b."{state}" = 'processing' AND b."{lease_expires_at}" > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')))
RETURNING "{id}", "{source}", "{idempotency_key}", "{aggregate_id}", "{event_type}", "{payload}", "{attempt}", "{correlation_id}", "{headers}", "{scheduled_at}", "{created_at}"
