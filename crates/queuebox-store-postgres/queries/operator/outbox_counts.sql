-- Locking: none, read only. Isolation: READ COMMITTED (one statement, so one snapshot).
-- Outbox rows for GET /admin/stats, without reading the table:
-- - rows per topic in the states an operator acts on (pending, processing, dead), exact: the
--   ranges of idx_outbox_state_created for those states, which carries topic (INCLUDE), so an
--   index-only scan; the totals of those states are their sums;
-- - the total of sent, most of the table, is an estimate: the planner's row count of the table
--   (pg_class.reltuples, as of the last vacuum or analyze) less the exact rows above, flagged
--   in the column estimated. An exact count of sent reads every sent row (the planner takes the
--   table or the whole index), which costs as much as the old full count. A table never
--   vacuumed or analyzed (reltuples -1) is counted exactly instead.
-- sent is not counted per topic, for the same reason. States are literals (SCH-9).
WITH live AS MATERIALIZED (
    SELECT o."{topic}"::text AS topic, o."{state}"::text AS state, count(*) AS n
    FROM "{outbox}" o
    WHERE o."{state}" IN ('pending', 'processing', 'dead')
    GROUP BY 1, 2
),
planner AS MATERIALIZED (
    SELECT COALESCE(max(c.reltuples), -1)::bigint AS n
    FROM pg_catalog.pg_class c
    WHERE c.oid = '"{outbox}"'::regclass
)
SELECT NULL::text AS topic, s.state,
       (SELECT COALESCE(sum(l.n), 0) FROM live l WHERE l.state = s.state)::bigint AS n,
       false AS estimated
FROM (VALUES ('pending'), ('processing'), ('dead')) AS s (state)
UNION ALL
SELECT NULL::text, 'sent',
       CASE WHEN p.n >= 0
            THEN GREATEST(0, p.n - (SELECT COALESCE(sum(l.n), 0) FROM live l))::bigint
            ELSE (SELECT count(*) FROM "{outbox}" o WHERE o."{state}" = 'sent') END,
       p.n >= 0
FROM planner p
UNION ALL
SELECT l.topic, l.state, l.n, false FROM live l
