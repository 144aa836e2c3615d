-- Locking: the row locks reclaim_select.sql took, in its transaction. Isolation: READ COMMITTED.
-- Reclaim, second statement: the expired rows the read locked back to pending; the UPDATE
-- repeats the tests. attempt, scheduled_at and last_error stay as they are.
-- :ids = JSON array of the ids the read returned.
-- Plan: the JSON array is read first (STRAIGHT_JOIN) and each of its rows finds its table row
-- through the unique index on id (FORCE INDEX), so the statement locks and waits for those
-- rows only, never for a row another transaction holds, however small the table.
UPDATE JSON_TABLE(:ids, '$[*]' COLUMNS (id CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) j
STRAIGHT_JOIN `{inbox}` t FORCE INDEX (`{inbox_id_index}`)
  ON t.`{id}` = j.id
SET t.`{state}` = 'pending',
    t.`{claim_token}` = NULL,
    t.`{lease_expires_at}` = NULL
WHERE t.`{state}` = 'processing'
  AND t.`{consumption}` = 'push'
  AND t.`{lease_expires_at}` <= UTC_TIMESTAMP(6)
