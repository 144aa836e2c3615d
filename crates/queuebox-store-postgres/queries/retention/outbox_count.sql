-- Outbox retention by count (RET-2, RET-3, RET-5, RET-6, RET-8). READ COMMITTED, one DELETE of
-- at most $2 rows. The newest $1 sent rows and, separately, the newest $1 dead rows are kept,
-- newest by (updated_at, id): each edge is the newest row of its state beyond them, read from
-- idx_outbox_state_updated with OFFSET, so the statement never ranks the whole table; rows at
-- or below the edge of their state go, oldest updated_at first. A state with at most $1 rows
-- has no edge (NULL), and the row comparison then matches nothing.
-- Locking: victims FOR UPDATE SKIP LOCKED, so concurrent runs split the work; the DELETE
-- repeats the state condition, so a row replayed after the read is kept.
-- $1 = rows to keep per state (bigint), $2 = batch size (bigint).
WITH sent_edge AS MATERIALIZED (
    SELECT e.{outbox.updated_at} AS updated_at, e.{outbox.id} AS id
    FROM {outbox} e
    WHERE e.{outbox.state} = 'sent'
    ORDER BY e.{outbox.updated_at} DESC, e.{outbox.id} DESC
    OFFSET $1::bigint LIMIT 1
),
dead_edge AS MATERIALIZED (
    SELECT e.{outbox.updated_at} AS updated_at, e.{outbox.id} AS id
    FROM {outbox} e
    WHERE e.{outbox.state} = 'dead'
    ORDER BY e.{outbox.updated_at} DESC, e.{outbox.id} DESC
    OFFSET $1::bigint LIMIT 1
)
DELETE FROM {outbox} o
WHERE o.ctid = ANY (ARRAY(
          SELECT d.ctid
          FROM {outbox} d
          WHERE (d.{outbox.state} = 'sent'
                 AND (d.{outbox.updated_at}, d.{outbox.id}) <= (SELECT updated_at, id FROM sent_edge))
             OR (d.{outbox.state} = 'dead'
                 AND (d.{outbox.updated_at}, d.{outbox.id}) <= (SELECT updated_at, id FROM dead_edge))
          ORDER BY d.{outbox.updated_at}
          LIMIT $2::bigint
          FOR UPDATE SKIP LOCKED))
  AND o.{outbox.state} IN ('sent', 'dead')
