-- Locking: victims FOR UPDATE SKIP LOCKED, then deleted. Isolation: READ COMMITTED.
-- Inbox retention by age (RET-2..4, RET-6, RET-8, RET-11). READ COMMITTED, one DELETE of at
-- most :batch rows, oldest created_at first (idx_inbox_state_created). Locking: the victims are
-- locked FOR UPDATE SKIP LOCKED, so concurrent runs of several replicas split the work; the
-- DELETE repeats every condition, so a row requeued after the read is kept. Never pending or
-- processing rows, push or pull.
-- :max_age_ms = maximum age in ms (bigint), :batch = batch size (bigint).
-- Each state is read in its own ordered range of the index and the two are merged: with
-- `state IN (...)` the planner could not read the index in order, so every batch scanned and
-- sorted all old rows (measured on the outbox's statement of the same shape: a sequential scan
-- and an on-disk sort, 303 ms per 1,000 rows of 1,000,000 `sent` rows; 13 ms merged), and a run
-- over a large backlog took time quadratic in its size (docs/benchmarks.md, "Outbox: scaling
-- with the backlog").
-- Each branch locks up to :batch rows of its state; the :batch oldest of them go, and the locks
-- of the others end with the statement (another replica skips them meanwhile).
DELETE FROM "{inbox}" i
WHERE i.ctid = ANY (ARRAY(
          SELECT v.ctid FROM (
              SELECT b.ctid, b.at FROM (
                  SELECT d.ctid, d."{created_at}" AS at
                  FROM "{inbox}" d
                  WHERE d."{state}" = 'processed'
                    AND d."{created_at}" < clock_timestamp() - :max_age_ms::bigint * INTERVAL '1 millisecond'
                  ORDER BY d."{created_at}"
                  LIMIT :batch::bigint
                  FOR UPDATE SKIP LOCKED) b
              UNION ALL
              SELECT b.ctid, b.at FROM (
                  SELECT d.ctid, d."{created_at}" AS at
                  FROM "{inbox}" d
                  WHERE d."{state}" = 'dead'
                    AND d."{created_at}" < clock_timestamp() - :max_age_ms::bigint * INTERVAL '1 millisecond'
                  ORDER BY d."{created_at}"
                  LIMIT :batch::bigint
                  FOR UPDATE SKIP LOCKED) b
          ) v
          ORDER BY v.at
          LIMIT :batch::bigint))
  AND i."{state}" IN ('processed', 'dead')
  AND i."{created_at}" < clock_timestamp() - :max_age_ms::bigint * INTERVAL '1 millisecond'
