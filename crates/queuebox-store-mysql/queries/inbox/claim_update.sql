-- Locking: the row locks claim_select.sql took, under the claim lock, in the claim transaction. Isolation: READ COMMITTED.
-- Relay claim, second statement (RLY-5): the rows QueueBox kept go processing, each with its
-- new token (made by QueueBox), in the same transaction. The UPDATE repeats state = 'pending'
-- and consumption = 'push'; the rows are locked since the read, so it changes every one.
-- :claims = JSON array of {"id", "token"}, :lease_ms = lease in milliseconds.
-- Plan: the JSON array is read first (STRAIGHT_JOIN) and each of its rows finds its table row
-- through the unique index on id (FORCE INDEX), so the statement locks and waits for those
-- rows only, never for a row another transaction holds, however small the table.
UPDATE JSON_TABLE(:claims, '$[*]' COLUMNS (
         id    CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
         token CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.token')) c
STRAIGHT_JOIN `{inbox}` t FORCE INDEX (`{inbox_id_index}`)
  ON t.`{id}` = c.id
SET t.`{state}` = 'processing',
    t.`{claim_token}` = c.token,
    t.`{claimed_at}` = UTC_TIMESTAMP(6),
    t.`{lease_expires_at}` = UTC_TIMESTAMP(6) + INTERVAL :lease_ms * 1000 MICROSECOND
WHERE t.`{state}` = 'pending' AND t.`{consumption}` = 'push'
