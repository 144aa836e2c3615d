-- Locking: none, read only. Isolation: READ COMMITTED.
-- Inbox rows per source and state, for operators. An exact count reads every row of the table
-- once; it is for the operator's occasional call, never for a gauge.
SELECT i.`{source}` AS source, i.`{state}` AS state, COUNT(*) AS n
FROM `{inbox}` i
GROUP BY i.`{source}`, i.`{state}`
