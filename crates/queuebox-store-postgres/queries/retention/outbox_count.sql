-- Locking: victims FOR UPDATE SKIP LOCKED, then deleted. Isolation: READ COMMITTED.
-- Outbox retention by count (RET-2, RET-3, RET-5, RET-6, RET-8). READ COMMITTED, one DELETE of
-- at most :batch rows. The newest :keep sent rows and, separately, the newest :keep dead rows are kept,
-- newest by (updated_at, id): each edge is the newest row of its state beyond them, read from
-- idx_outbox_state_updated with OFFSET, so the statement never ranks the whole table; rows at
-- or below the edge of their state go, oldest updated_at first. A state with at most :keep rows
-- has no edge (NULL), and the row comparison then matches nothing.
-- Locking: victims FOR UPDATE SKIP LOCKED, so concurrent runs split the work; the DELETE
-- repeats the state condition, so a row replayed after the read is kept.
-- :keep = rows to keep per state (bigint), :batch = batch size (bigint).
-- Each state is read in its own ordered range of the index and the two are merged: with
-- `state IN (...)` the planner could not read the index in order, so every batch scanned and
-- sorted all old rows (a sequential scan and an on-disk sort, 303 ms per 1,000 rows of an
-- outbox of 1,000,000 `sent` rows; 13 ms merged), and a run over a large backlog took time
-- quadratic in its size (docs/benchmarks.md, "Outbox: scaling with the backlog").
-- Each branch locks up to :batch rows of its state; the :batch oldest of them go, and the locks
-- of the others end with the statement (another replica skips them meanwhile).
WITH sent_edge AS MATERIALIZED (
    SELECT e."{updated_at}" AS updated_at, e."{id}" AS id
    FROM "{outbox}" e
    WHERE e."{state}" = 'sent'
    ORDER BY e."{updated_at}" DESC, e."{id}" DESC
    OFFSET :keep::bigint LIMIT 1
),
dead_edge AS MATERIALIZED (
    SELECT e."{updated_at}" AS updated_at, e."{id}" AS id
    FROM "{outbox}" e
    WHERE e."{state}" = 'dead'
    ORDER BY e."{updated_at}" DESC, e."{id}" DESC
    OFFSET :keep::bigint LIMIT 1
)
DELETE FROM "{outbox}" o
WHERE o.ctid = ANY (ARRAY(
          SELECT v.ctid FROM (
              SELECT b.ctid, b.at FROM (
                  SELECT d.ctid, d."{updated_at}" AS at
                  FROM "{outbox}" d
                  WHERE d."{state}" = 'sent'
                    AND (d."{updated_at}", d."{id}") <= (SELECT updated_at, id FROM sent_edge)
                  ORDER BY d."{updated_at}"
                  LIMIT :batch::bigint
                  FOR UPDATE SKIP LOCKED) b
              UNION ALL
              SELECT b.ctid, b.at FROM (
                  SELECT d.ctid, d."{updated_at}" AS at
                  FROM "{outbox}" d
                  WHERE d."{state}" = 'dead'
                    AND (d."{updated_at}", d."{id}") <= (SELECT updated_at, id FROM dead_edge)
                  ORDER BY d."{updated_at}"
                  LIMIT :batch::bigint
                  FOR UPDATE SKIP LOCKED) b
          ) v
          ORDER BY v.at
          LIMIT :batch::bigint))
  AND o."{state}" IN ('sent', 'dead')
