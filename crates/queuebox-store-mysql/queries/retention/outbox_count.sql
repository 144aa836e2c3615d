-- Locking: victims FOR UPDATE SKIP LOCKED, in the batch's transaction. Isolation: READ COMMITTED.
-- Outbox retention by count (RET-2, RET-3, RET-5, RET-6, RET-8), first statement: at most
-- :batch rows beyond the newest :keep sent rows and, separately, the newest :keep dead rows,
-- newest by (updated_at, id). Each edge is the newest row of its state beyond those kept, read
-- from idx_outbox_state_updated with OFFSET, so the statement never ranks the whole table;
-- rows at or below the edge of their state go, oldest updated_at first. A state with at most
-- :keep rows has no edge (the row subquery is NULL) and the comparison matches nothing.
-- Locking: victims FOR UPDATE SKIP LOCKED, so concurrent runs split the work; the edge reads
-- are plain consistent reads. operator/outbox_delete_ids.sql deletes them in the same
-- transaction, repeating the state guard.
-- :keep = rows to keep per state, :batch = batch size.
SELECT d.`{id}`
FROM `{outbox}` d
WHERE (d.`{state}` = 'sent'
       AND (d.`{updated_at}`, d.`{id}`) <= (
            SELECT e.`{updated_at}`, e.`{id}` FROM `{outbox}` e
            WHERE e.`{state}` = 'sent'
            ORDER BY e.`{updated_at}` DESC, e.`{id}` DESC
            LIMIT 1 OFFSET :keep))
   OR (d.`{state}` = 'dead'
       AND (d.`{updated_at}`, d.`{id}`) <= (
            SELECT e.`{updated_at}`, e.`{id}` FROM `{outbox}` e
            WHERE e.`{state}` = 'dead'
            ORDER BY e.`{updated_at}` DESC, e.`{id}` DESC
            LIMIT 1 OFFSET :keep))
ORDER BY d.`{updated_at}`
LIMIT :batch
FOR UPDATE SKIP LOCKED
