-- Outbox retention by age (RET-2..4, RET-6, RET-8). READ COMMITTED, one DELETE of at most $2
-- rows, oldest updated_at first (idx_outbox_state_updated). Locking: the victims are locked
-- FOR UPDATE SKIP LOCKED, so concurrent runs of several replicas split the work instead of
-- waiting; the DELETE repeats every condition, so a row that changed state (a replay) after
-- the read is kept. Never pending or processing rows.
-- $1 = maximum age in ms (bigint), $2 = batch size (bigint).
DELETE FROM {outbox} o
WHERE o.ctid = ANY (ARRAY(
          SELECT d.ctid
          FROM {outbox} d
          WHERE d.{outbox.state} IN ('sent', 'dead')
            AND d.{outbox.updated_at} < clock_timestamp() - $1::bigint * INTERVAL '1 millisecond'
          ORDER BY d.{outbox.updated_at}
          LIMIT $2::bigint
          FOR UPDATE SKIP LOCKED))
  AND o.{outbox.state} IN ('sent', 'dead')
  AND o.{outbox.updated_at} < clock_timestamp() - $1::bigint * INTERVAL '1 millisecond'
