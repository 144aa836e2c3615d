-- Locking: none, read only. Isolation: a read snapshot (WAL).
-- Rows per source and state (the admin counts).
SELECT i."{source}", i."{state}", count(*)
FROM "{inbox}" i
GROUP BY 1, 2
ORDER BY 1, 2
