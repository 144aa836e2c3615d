-- Locking: the row locks the victims' read took, in its transaction. Isolation: READ COMMITTED.
-- Deletes the rows a locking read chose (bulk delete, retention), repeating the guard that
-- only sent and dead rows go: a row that left those states is kept.
-- :ids = JSON array of ids.
-- Plan: the JSON array is read first (STRAIGHT_JOIN) and each of its rows finds its table row
-- through the unique index on id (FORCE INDEX), so the statement locks and waits for those
-- rows only, never for a row another transaction holds, however small the table.
DELETE t FROM JSON_TABLE(:ids, '$[*]' COLUMNS (id CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) j
STRAIGHT_JOIN `{outbox}` t FORCE INDEX (`{outbox_id_index}`)
  ON t.`{id}` = j.id
WHERE t.`{state}` IN ('sent', 'dead')
