-- Locking: none, read only. Isolation: READ COMMITTED.
-- Inbox rows per source and state, for operators. An exact count reads every row of the table
-- once; it is for the operator's occasional call, never for a gauge.
SELECT i."{source}"::text AS source, i."{state}"::text AS state, count(*) AS n
FROM "{inbox}" i
GROUP BY 1, 2
ORDER BY 1, 2
