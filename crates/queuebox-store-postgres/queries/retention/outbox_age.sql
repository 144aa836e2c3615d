-- Locking: victims FOR UPDATE SKIP LOCKED, then deleted. Isolation: READ COMMITTED.
-- Outbox retention by age (RET-2..4, RET-6, RET-8). READ COMMITTED, one DELETE of at most :batch
-- rows, oldest updated_at first (idx_outbox_state_updated). Locking: the victims are locked
-- FOR UPDATE SKIP LOCKED, so concurrent runs of several replicas split the work instead of
-- waiting; the DELETE repeats every condition, so a row that changed state (a replay) after
-- the read is kept. Never pending or processing rows.
-- :max_age_ms = maximum age in ms (bigint), :batch = batch size (bigint).
DELETE FROM "{outbox}" o
WHERE o.ctid = ANY (ARRAY(
          SELECT d.ctid
          FROM "{outbox}" d
          WHERE d."{state}" IN ('sent', 'dead')
            AND d."{updated_at}" < clock_timestamp() - :max_age_ms::bigint * INTERVAL '1 millisecond'
          ORDER BY d."{updated_at}"
          LIMIT :batch::bigint
          FOR UPDATE SKIP LOCKED))
  AND o."{state}" IN ('sent', 'dead')
  AND o."{updated_at}" < clock_timestamp() - :max_age_ms::bigint * INTERVAL '1 millisecond'
