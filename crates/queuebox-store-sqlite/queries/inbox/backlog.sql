-- Locking: none, read only. Isolation: a read snapshot (WAL).
-- The inbox operator gauges. The first row (source NULL) carries the dead count, a range of
-- idx_inbox_state_created; then one row per source with pending rows (push and pull, due or
-- not): its count and the age of its oldest row by created_at, from the pending range of
-- idx_inbox_state_created (O(pending)). States are literals (SCH-9).
SELECT NULL, (SELECT count(*) FROM "{inbox}" d WHERE d."{state}" = 'dead'), 0.0
UNION ALL
SELECT p."{source}", count(*),
       COALESCE(max(0.0, (julianday('now') - julianday(min(p."{created_at}"))) * 86400.0), 0.0)
FROM "{inbox}" p
WHERE p."{state}" = 'pending'
GROUP BY p."{source}"
