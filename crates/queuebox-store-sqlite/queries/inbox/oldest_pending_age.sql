-- Locking: none, read only. Isolation: a read snapshot (WAL).
-- The oldest-pending gauge (RLY-16, MET catalogue). Push and pull rows both count; each
-- minimum is read from its partial index, whose conditions repeat here as literals (SCH-9).
-- When the oldest pending row is not due yet, the age is 0; with no pending row it is 0 too.
-- SQLite's two-argument min() is NULL when either is, so the earlier of the two is taken from
-- the non-NULL ones.
SELECT COALESCE(max(0.0, (julianday('now') - julianday(min(coalesce(m.push, m.pull), coalesce(m.pull, m.push)))) * 86400.0), 0.0)
FROM (SELECT (SELECT min(p."{scheduled_at}") FROM "{inbox}" p
              WHERE p."{consumption}" = 'push' AND p."{state}" = 'pending') AS push,
             (SELECT min(q."{scheduled_at}") FROM "{inbox}" q
              WHERE q."{consumption}" = 'pull' AND q."{state}" = 'pending') AS pull) m
