-- Locking: victims FOR UPDATE SKIP LOCKED, then deleted. Isolation: READ COMMITTED.
-- Inbox retention by age (RET-2..4, RET-6, RET-8, RET-11). READ COMMITTED, one DELETE of at
-- most :batch rows, oldest created_at first (idx_inbox_state_created). Locking: the victims are
-- locked FOR UPDATE SKIP LOCKED, so concurrent runs of several replicas split the work; the
-- DELETE repeats every condition, so a row requeued after the read is kept. Never pending or
-- processing rows, push or pull.
-- :max_age_ms = maximum age in ms (bigint), :batch = batch size (bigint).
DELETE FROM "{inbox}" i
WHERE i.ctid = ANY (ARRAY(
          SELECT d.ctid
          FROM "{inbox}" d
          WHERE d."{state}" IN ('processed', 'dead')
            AND d."{created_at}" < clock_timestamp() - :max_age_ms::bigint * INTERVAL '1 millisecond'
          ORDER BY d."{created_at}"
          LIMIT :batch::bigint
          FOR UPDATE SKIP LOCKED))
  AND i."{state}" IN ('processed', 'dead')
  AND i."{created_at}" < clock_timestamp() - :max_age_ms::bigint * INTERVAL '1 millisecond'
