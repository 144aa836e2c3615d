-- Locking: none, read only. Isolation: a read snapshot (WAL).
-- Rows per topic and state (the admin counts); byte order of topics (SQLite's BINARY collation).
SELECT o."{topic}", o."{state}", count(*)
FROM "{outbox}" o
GROUP BY 1, 2
ORDER BY 1, 2
