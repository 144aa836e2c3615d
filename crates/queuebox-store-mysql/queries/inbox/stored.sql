-- Locking: none, a consistent read by primary key. Isolation: READ COMMITTED.
-- Which ids of a batch insert.sql stored (INB-50): QueueBox made every id (UUID v7), so an id
-- that exists is a row of this batch; the others met an existing pair. Run right after
-- insert.sql on the same connection.
-- :ids = JSON array of ids.
-- Plan: the JSON array is read first (STRAIGHT_JOIN) and each of its rows finds its table row
-- through the unique index on id (FORCE INDEX), so the statement locks and waits for those
-- rows only, never for a row another transaction holds, however small the table.
SELECT i.`{id}`
FROM JSON_TABLE(:ids, '$[*]' COLUMNS (id CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) j
STRAIGHT_JOIN `{inbox}` i FORCE INDEX (`{inbox_id_index}`)
  ON i.`{id}` = j.id
