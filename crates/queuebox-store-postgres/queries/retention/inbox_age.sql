-- Inbox retention by age (RET-2..4, RET-6, RET-8, RET-11). READ COMMITTED, one DELETE of at
-- most $2 rows, oldest created_at first (idx_inbox_state_created). Locking: the victims are
-- locked FOR UPDATE SKIP LOCKED, so concurrent runs of several replicas split the work; the
-- DELETE repeats every condition, so a row requeued after the read is kept. Never pending or
-- processing rows, push or pull.
-- $1 = maximum age in ms (bigint), $2 = batch size (bigint).
DELETE FROM {inbox} i
WHERE i.ctid = ANY (ARRAY(
          SELECT d.ctid
          FROM {inbox} d
          WHERE d.{state} IN ('processed', 'dead')
            AND d.{created_at} < clock_timestamp() - $1::bigint * INTERVAL '1 millisecond'
          ORDER BY d.{created_at}
          LIMIT $2::bigint
          FOR UPDATE SKIP LOCKED))
  AND i.{state} IN ('processed', 'dead')
  AND i.{created_at} < clock_timestamp() - $1::bigint * INTERVAL '1 millisecond'
