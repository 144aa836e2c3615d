-- Locking: none, read only. Isolation: READ COMMITTED (one statement, so one snapshot).
-- Inbox rows for GET /admin/stats, without reading the table for the bulk of its rows:
-- - one exact total per state (a row with a NULL source), each a count over one range of
--   idx_inbox_state_created, an index-only scan, which reads the heap only for pages that
--   vacuum has not marked all-visible yet (the old processed rows are);
-- - rows per source in the states an operator acts on (pending, processing, dead), read from
--   the same ranges, with the source from the table for those rows only. processed is not
--   counted per source: that count would read every processed row of the table.
-- States are literals (SCH-9).
SELECT NULL::text AS source, 'pending' AS state,
       (SELECT count(*) FROM "{inbox}" i WHERE i."{state}" = 'pending') AS n
UNION ALL
SELECT NULL::text, 'processing',
       (SELECT count(*) FROM "{inbox}" i WHERE i."{state}" = 'processing')
UNION ALL
SELECT NULL::text, 'processed',
       (SELECT count(*) FROM "{inbox}" i WHERE i."{state}" = 'processed')
UNION ALL
SELECT NULL::text, 'dead', (SELECT count(*) FROM "{inbox}" i WHERE i."{state}" = 'dead')
UNION ALL
SELECT i."{source}"::text, i."{state}"::text, count(*)
FROM "{inbox}" i
WHERE i."{state}" IN ('pending', 'processing', 'dead')
GROUP BY 1, 2
