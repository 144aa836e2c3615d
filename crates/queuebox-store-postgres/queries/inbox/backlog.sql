-- Locking: none, read only. Isolation: READ COMMITTED.
-- The inbox operator gauges. The first row (source NULL) carries the dead count, a range of
-- idx_inbox_state_created; then one row per source with pending rows (push and pull, due or
-- not): its count and the age of its oldest row by created_at, from the pending range of
-- idx_inbox_state_created (O(pending), like the outbox pending count). States are literals
-- (SCH-9). The clock is read once.
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS at)
SELECT NULL::text AS source,
       (SELECT count(*) FROM "{inbox}" d WHERE d."{state}" = 'dead')::bigint AS n,
       0::float8 AS oldest_created_age_seconds
UNION ALL
SELECT p."{source}"::text,
       count(*)::bigint,
       COALESCE(GREATEST(0, EXTRACT(EPOCH FROM (SELECT at FROM clock) - min(p."{created_at}"))),
                0)::float8
FROM "{inbox}" p
WHERE p."{state}" = 'pending'
GROUP BY p."{source}"
