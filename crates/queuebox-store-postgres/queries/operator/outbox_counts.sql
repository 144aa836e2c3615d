-- Locking: none, read only. Isolation: READ COMMITTED (one statement, so one snapshot).
-- Outbox rows for GET /admin/stats, without reading the table for the bulk of its rows:
-- - one exact total per state (a row with a NULL topic), each a count over one range of a
--   state index: idx_outbox_pending for pending, idx_outbox_state_created (or
--   idx_outbox_state_updated) for the others; an index-only scan, which reads the heap only
--   for pages that vacuum has not marked all-visible yet (the old sent rows are);
-- - rows per topic in the states an operator acts on (pending, processing, dead): ranges of
--   idx_outbox_state_created, which carries topic (INCLUDE), so an index-only scan as well.
--   sent is not counted per topic: it is most of the table, and grouping every sent row costs
--   as much as reading them (the exact total is one count, without the grouping).
-- States are literals (SCH-9), so the partial index of pending applies.
SELECT NULL::text AS topic, 'pending' AS state,
       (SELECT count(*) FROM "{outbox}" o WHERE o."{state}" = 'pending') AS n
UNION ALL
SELECT NULL::text, 'processing',
       (SELECT count(*) FROM "{outbox}" o WHERE o."{state}" = 'processing')
UNION ALL
SELECT NULL::text, 'sent', (SELECT count(*) FROM "{outbox}" o WHERE o."{state}" = 'sent')
UNION ALL
SELECT NULL::text, 'dead', (SELECT count(*) FROM "{outbox}" o WHERE o."{state}" = 'dead')
UNION ALL
SELECT o."{topic}"::text, o."{state}"::text, count(*)
FROM "{outbox}" o
WHERE o."{state}" IN ('pending', 'processing', 'dead')
GROUP BY 1, 2
