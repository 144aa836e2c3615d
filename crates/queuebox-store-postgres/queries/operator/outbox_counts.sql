-- Locking: none, read only. Isolation: READ COMMITTED.
-- Outbox rows per topic and state, for operators. An exact count reads every row of the table
-- once (no index holds topic); it is for the operator's occasional call, never for a gauge.
SELECT o."{topic}"::text AS topic, o."{state}"::text AS state, count(*) AS n
FROM "{outbox}" o
GROUP BY 1, 2
ORDER BY 1, 2
