-- Locking: the row locks claim_select.sql took, in the claim transaction. Isolation: READ COMMITTED.
-- Claim, second statement (OUT-16): the rows claim_select.sql locked go processing, each with
-- its new token (made by QueueBox, one random UUID per row), in the same transaction. The
-- UPDATE repeats state = 'pending'; the rows are locked since the read, so it changes every one
-- of them. UTC_TIMESTAMP(6) is one instant for the whole statement.
-- :claims = JSON array of {"id", "token"}, :lease_ms = lease in milliseconds.
-- Plan: the JSON array is read first (STRAIGHT_JOIN) and each of its rows finds its table row
-- through the unique index on id (FORCE INDEX), so the statement locks and waits for those
-- rows only, never for a row another transaction holds, however small the table.
UPDATE JSON_TABLE(:claims, '$[*]' COLUMNS (
         id    CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
         token CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.token')) c
STRAIGHT_JOIN `{outbox}` t FORCE INDEX (`{outbox_id_index}`)
  ON t.`{id}` = c.id
SET t.`{state}` = 'processing',
    t.`{claim_token}` = c.token,
    t.`{claimed_at}` = UTC_TIMESTAMP(6),
    t.`{lease_expires_at}` = UTC_TIMESTAMP(6) + INTERVAL :lease_ms * 1000 MICROSECOND,
    t.`{updated_at}` = UTC_TIMESTAMP(6)
WHERE t.`{state}` = 'pending'
