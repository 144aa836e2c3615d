-- Locking: none, read only. Isolation: READ COMMITTED.
-- Pending gauges (MET catalogue). READ COMMITTED, read only, no row locks. state = 'pending'
-- is a literal so the partial index idx_outbox_pending serves it (SCH-9, SCH-14). The clock is
-- read once, so the due test and the ages use the same instant. Always one row (count 0, ages
-- 0 when nothing is pending). The age by created_at reads the same pending rows (one pass,
-- O(pending), like the count); the dead count is a range of idx_outbox_state_updated.
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS at)
SELECT count(*)::bigint AS pending,
       COALESCE(
           GREATEST(0, EXTRACT(EPOCH FROM (SELECT at FROM clock) - min(o."{scheduled_at}")
               FILTER (WHERE o."{scheduled_at}" <= (SELECT at FROM clock)))),
           0)::float8 AS oldest_due_age_seconds,
       COALESCE(
           GREATEST(0, EXTRACT(EPOCH FROM (SELECT at FROM clock) - min(o."{created_at}"))),
           0)::float8 AS oldest_created_age_seconds,
       (SELECT count(*) FROM "{outbox}" d WHERE d."{state}" = 'dead')::bigint AS dead
FROM "{outbox}" o
WHERE o."{state}" = 'pending'
