-- Locking: none, read only. Isolation: a read snapshot (WAL).
-- Outbox rows for GET /admin/stats, from indexes alone: one exact total per state (a row with
-- a NULL topic), each a count over one range of a state index (idx_outbox_pending for pending,
-- a covering index for the others), then rows per topic in the states an operator acts on
-- (pending, processing, dead) from idx_outbox_state_created, which holds topic. sent is not
-- counted per topic: it is most of the table, and grouping every sent row costs as much as
-- reading them. States are literals (SCH-9).
SELECT NULL AS topic, 'pending' AS state,
       (SELECT count(*) FROM "{outbox}" o WHERE o."{state}" = 'pending') AS n
UNION ALL
SELECT NULL, 'processing', (SELECT count(*) FROM "{outbox}" o WHERE o."{state}" = 'processing')
UNION ALL
SELECT NULL, 'sent', (SELECT count(*) FROM "{outbox}" o WHERE o."{state}" = 'sent')
UNION ALL
SELECT NULL, 'dead', (SELECT count(*) FROM "{outbox}" o WHERE o."{state}" = 'dead')
UNION ALL
SELECT o."{topic}", o."{state}", count(*)
FROM "{outbox}" o
WHERE o."{state}" IN ('pending', 'processing', 'dead')
GROUP BY 1, 2
