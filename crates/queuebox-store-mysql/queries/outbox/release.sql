-- Locking: the row locks fence.sql took, in its transaction. Isolation: READ COMMITTED.
-- Release at shutdown (OUT-58 step 2, SCH-15), after fence.sql, for the claims it returned.
-- attempt, scheduled_at and last_error stay as they are (OUT-59).
-- :claims = JSON array of {"id", "token"}.
-- Plan: the JSON array is read first (STRAIGHT_JOIN) and each of its rows finds its table row
-- through the unique index on id (FORCE INDEX), so the statement locks and waits for those
-- rows only, never for a row another transaction holds, however small the table.
UPDATE JSON_TABLE(:claims, '$[*]' COLUMNS (
         id    CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
         token CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.token')) c
STRAIGHT_JOIN `{outbox}` t FORCE INDEX (`{outbox_id_index}`)
  ON t.`{id}` = c.id AND t.`{claim_token}` = c.token
SET t.`{state}` = 'pending',
    t.`{claim_token}` = NULL,
    t.`{lease_expires_at}` = NULL,
    t.`{updated_at}` = UTC_TIMESTAMP(6)
WHERE t.`{state}` = 'processing'
