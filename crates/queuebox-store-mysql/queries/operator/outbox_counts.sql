-- Locking: none, read only. Isolation: READ COMMITTED.
-- Outbox rows per topic and state, for operators. An exact count reads every row of the table
-- once (no index holds topic); it is for the operator's occasional call, never for a gauge.
SELECT o.`{topic}` AS topic, o.`{state}` AS state, COUNT(*) AS n
FROM `{outbox}` o
GROUP BY o.`{topic}`, o.`{state}`
