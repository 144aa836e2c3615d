-- Locking: none, read only. Isolation: READ COMMITTED (one statement, so one snapshot).
-- Inbox rows for GET /admin/stats, without reading the table for the bulk of its rows:
-- - rows per source in the states an operator acts on (pending, processing, dead), exact: the
--   ranges of idx_inbox_state_created for those states, with the source read from the table
--   for those rows only; the totals of those states are their sums;
-- - the total of processed, most of the table, is an estimate: the planner's row count of the
--   table (pg_class.reltuples, as of the last vacuum or analyze) less the exact rows above,
--   flagged in the column estimated. An exact count of processed reads every processed row.
--   A table never vacuumed or analyzed (reltuples -1) is counted exactly instead.
-- processed is not counted per source, for the same reason. States are literals (SCH-9).
WITH live AS MATERIALIZED (
    SELECT i."{source}"::text AS source, i."{state}"::text AS state, count(*) AS n
    FROM "{inbox}" i
    WHERE i."{state}" IN ('pending', 'processing', 'dead')
    GROUP BY 1, 2
),
planner AS MATERIALIZED (
    SELECT COALESCE(max(c.reltuples), -1)::bigint AS n
    FROM pg_catalog.pg_class c
    WHERE c.oid = '"{inbox}"'::regclass
)
SELECT NULL::text AS source, s.state,
       (SELECT COALESCE(sum(l.n), 0) FROM live l WHERE l.state = s.state)::bigint AS n,
       false AS estimated
FROM (VALUES ('pending'), ('processing'), ('dead')) AS s (state)
UNION ALL
SELECT NULL::text, 'processed',
       CASE WHEN p.n >= 0
            THEN GREATEST(0, p.n - (SELECT COALESCE(sum(l.n), 0) FROM live l))::bigint
            ELSE (SELECT count(*) FROM "{inbox}" i WHERE i."{state}" = 'processed') END,
       p.n >= 0
FROM planner p
UNION ALL
SELECT l.source, l.state, l.n, false FROM live l
