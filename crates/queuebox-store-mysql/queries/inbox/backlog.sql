-- Locking: none, read only. Isolation: READ COMMITTED.
-- The inbox operator gauges, a consistent read. The first row (source NULL) carries the dead
-- count, a range of idx_inbox_state_created (state, created_at); then one row per source with
-- pending rows (push and pull, due or not): its count and the age of its oldest row by
-- created_at, from the pending range of the same index (O(pending)). States are literals
-- (SCH-9). UTC_TIMESTAMP(6) is one instant.
SELECT CAST(NULL AS CHAR) AS source,
       (SELECT COUNT(*) FROM `{inbox}` d WHERE d.`{state}` = 'dead') AS n,
       0e0 AS oldest_created_age_seconds
UNION ALL
SELECT p.`{source}`, COUNT(*),
       COALESCE(GREATEST(0, TIMESTAMPDIFF(MICROSECOND, MIN(p.`{created_at}`),
           UTC_TIMESTAMP(6))) / 1e6, 0e0)
FROM `{inbox}` p
WHERE p.`{state}` = 'pending'
GROUP BY p.`{source}`
