-- Locking: none, read only. Isolation: READ COMMITTED (one statement, so one snapshot).
-- Inbox rows for GET /admin/stats: one exact total per state (a row with a NULL source), each
-- a count over one range of idx_inbox_state_created (read from the index alone), then rows per
-- source in the states an operator acts on (pending, processing, dead), from the same ranges
-- with the source read from the table for those rows only. processed is not counted per
-- source: that would read every processed row of the table. States are literals (SCH-9).
SELECT CAST(NULL AS CHAR) AS source, 'pending' AS state,
       (SELECT COUNT(*) FROM `{inbox}` i WHERE i.`{state}` = 'pending') AS n
UNION ALL
SELECT NULL, 'processing', (SELECT COUNT(*) FROM `{inbox}` i WHERE i.`{state}` = 'processing')
UNION ALL
SELECT NULL, 'processed', (SELECT COUNT(*) FROM `{inbox}` i WHERE i.`{state}` = 'processed')
UNION ALL
SELECT NULL, 'dead', (SELECT COUNT(*) FROM `{inbox}` i WHERE i.`{state}` = 'dead')
UNION ALL
SELECT i.`{source}`, i.`{state}`, COUNT(*)
FROM `{inbox}` i
WHERE i.`{state}` IN ('pending', 'processing', 'dead')
GROUP BY i.`{source}`, i.`{state}`
