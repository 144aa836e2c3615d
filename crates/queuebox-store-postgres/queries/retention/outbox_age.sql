-- Locking: victims FOR UPDATE SKIP LOCKED, then deleted. Isolation: READ COMMITTED.
-- Outbox retention by age (RET-2..4, RET-6, RET-8). READ COMMITTED, one DELETE of at most :batch
-- rows, oldest updated_at first (idx_outbox_state_updated). Locking: the victims are locked
-- FOR UPDATE SKIP LOCKED, so concurrent runs of several replicas split the work instead of
-- waiting; the DELETE repeats every condition, so a row that changed state (a replay) after
-- the read is kept. Never pending or processing rows.
-- :max_age_ms = maximum age in ms (bigint), :batch = batch size (bigint).
-- Each state is read in its own ordered range of the index and the two are merged: with
-- `state IN (...)` the planner could not read the index in order, so every batch scanned and
-- sorted all old rows (a sequential scan and an on-disk sort, 303 ms per 1,000 rows of an
-- outbox of 1,000,000 `sent` rows; 13 ms merged), and a run over a large backlog took time
-- quadratic in its size (docs/benchmarks.md, "Outbox: scaling with the backlog").
-- Each branch locks up to :batch rows of its state; the :batch oldest of them go, and the locks
-- of the others end with the statement (another replica skips them meanwhile).
DELETE FROM "{outbox}" o
WHERE o.ctid = ANY (ARRAY(
          SELECT v.ctid FROM (
              SELECT b.ctid, b.at FROM (
                  SELECT d.ctid, d."{updated_at}" AS at
                  FROM "{outbox}" d
                  WHERE d."{state}" = 'sent'
                    AND d."{updated_at}" < clock_timestamp() - :max_age_ms::bigint * INTERVAL '1 millisecond'
                  ORDER BY d."{updated_at}"
                  LIMIT :batch::bigint
                  FOR UPDATE SKIP LOCKED) b
              UNION ALL
              SELECT b.ctid, b.at FROM (
                  SELECT d.ctid, d."{updated_at}" AS at
                  FROM "{outbox}" d
                  WHERE d."{state}" = 'dead'
                    AND d."{updated_at}" < clock_timestamp() - :max_age_ms::bigint * INTERVAL '1 millisecond'
                  ORDER BY d."{updated_at}"
                  LIMIT :batch::bigint
                  FOR UPDATE SKIP LOCKED) b
          ) v
          ORDER BY v.at
          LIMIT :batch::bigint))
  AND o."{state}" IN ('sent', 'dead')
  AND o."{updated_at}" < clock_timestamp() - :max_age_ms::bigint * INTERVAL '1 millisecond'
