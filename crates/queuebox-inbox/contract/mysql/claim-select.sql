-- Claim step 3 of 7 (pull.md §5.3). Locking: plain reads under the named lock of step 1 (no other claim of this source runs); READ COMMITTED, inside the claim transaction. Returns the ids to take (0 to :batch); with none, COMMIT and unlock.
WITH candidates AS (
    (SELECT c.`{id}`, c.`{aggregate_id}`, c.`{scheduled_at}`, c.`{created_at}`
       FROM `{inbox}` c
      WHERE c.`{consumption}` = 'pull' AND c.`{source}` = :source
        AND c.`{state}` = 'pending' AND c.`{scheduled_at}` <= UTC_TIMESTAMP(6)
      ORDER BY c.`{scheduled_at}`, c.`{created_at}`, c.`{id}`
      LIMIT :cand_limit)
    UNION ALL
    (SELECT c.`{id}`, c.`{aggregate_id}`, c.`{scheduled_at}`, c.`{created_at}`
       FROM `{inbox}` c
      WHERE c.`{consumption}` = 'pull' AND c.`{source}` = :source
        AND c.`{state}` = 'processing' AND c.`{lease_expires_at}` <= UTC_TIMESTAMP(6)
      ORDER BY c.`{scheduled_at}`, c.`{created_at}`, c.`{id}`
      LIMIT :cand_limit)
),
ready AS (
    SELECT r.`{id}`, r.`{aggregate_id}`, r.`{scheduled_at}`, r.`{created_at}`,
           ROW_NUMBER() OVER (
               PARTITION BY COALESCE(r.`{aggregate_id}`, CONCAT('#', r.`{id}`))
               ORDER BY r.`{scheduled_at}`, r.`{created_at}`, r.`{id}`) AS rn
      FROM candidates r
)
SELECT e.`{id}`
  FROM ready e
 WHERE e.rn = 1
   AND (e.`{aggregate_id}` IS NULL OR NOT EXISTS (
            SELECT 1 FROM `{inbox}` b
             WHERE b.`{consumption}` = 'pull' AND b.`{source}` = :source
               AND b.`{aggregate_id}` = e.`{aggregate_id}`
               AND b.`{state}` = 'processing' AND b.`{lease_expires_at}` > UTC_TIMESTAMP(6)))
 ORDER BY e.`{scheduled_at}`, e.`{created_at}`, e.`{id}`
 LIMIT :batch
