-- Locking: none, read only. Isolation: READ COMMITTED.
-- The oldest-pending gauge (RLY-16, MET catalogue). READ COMMITTED, read only, no row locks.
-- Push and pull rows both count. Each minimum is read from its partial index
-- (idx_inbox_push_pending, idx_inbox_pull_pending), whose conditions repeat here as literals
-- (SCH-9). The clock is read once. When the oldest pending row is not due yet, no row is due
-- and the age is 0; with no pending row at all, LEAST of two NULLs is NULL and the age is 0.
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS at)
SELECT COALESCE(
           GREATEST(0, EXTRACT(EPOCH FROM (SELECT at FROM clock) - LEAST(
               (SELECT min(p."{scheduled_at}") FROM "{inbox}" p
                WHERE p."{consumption}" = 'push' AND p."{state}" = 'pending'),
               (SELECT min(q."{scheduled_at}") FROM "{inbox}" q
                WHERE q."{consumption}" = 'pull' AND q."{state}" = 'pending')))),
           0)::float8 AS oldest_pending_age_seconds
