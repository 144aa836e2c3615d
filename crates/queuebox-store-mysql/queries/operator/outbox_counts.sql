-- Locking: none, read only. Isolation: READ COMMITTED (one statement, so one snapshot).
-- Outbox rows for GET /admin/stats, from indexes alone: one exact total per state (a row with
-- a NULL topic), each a count over one range of a state index, then rows per topic in the
-- states an operator acts on (pending, processing, dead) from idx_outbox_state_created, which
-- holds topic. sent is not counted per topic: it is most of the table, and grouping every sent
-- row costs as much as reading them. States are literals (SCH-9).
SELECT CAST(NULL AS CHAR) AS topic, 'pending' AS state,
       (SELECT COUNT(*) FROM `{outbox}` o WHERE o.`{state}` = 'pending') AS n
UNION ALL
SELECT NULL, 'processing', (SELECT COUNT(*) FROM `{outbox}` o WHERE o.`{state}` = 'processing')
UNION ALL
SELECT NULL, 'sent', (SELECT COUNT(*) FROM `{outbox}` o WHERE o.`{state}` = 'sent')
UNION ALL
SELECT NULL, 'dead', (SELECT COUNT(*) FROM `{outbox}` o WHERE o.`{state}` = 'dead')
UNION ALL
SELECT o.`{topic}`, o.`{state}`, COUNT(*)
FROM `{outbox}` o
WHERE o.`{state}` IN ('pending', 'processing', 'dead')
GROUP BY o.`{topic}`, o.`{state}`
