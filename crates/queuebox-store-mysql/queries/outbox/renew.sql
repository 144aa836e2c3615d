-- Locking: the row locks fence.sql took, in its transaction. Isolation: READ COMMITTED.
-- Renew (OUT-40/41), after fence.sql: the claims given are the ones the fence returned, so the
-- lease test is not repeated (the locks held since the read keep the rows as they were).
-- :claims = JSON array of {"id", "token"}, :lease_ms = lease in milliseconds.
-- Plan: the JSON array is read first (STRAIGHT_JOIN) and each of its rows finds its table row
-- through the unique index on id (FORCE INDEX), so the statement locks and waits for those
-- rows only, never for a row another transaction holds, however small the table.
UPDATE JSON_TABLE(:claims, '$[*]' COLUMNS (
         id    CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
         token CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.token')) c
STRAIGHT_JOIN `{outbox}` t FORCE INDEX (`{outbox_id_index}`)
  ON t.`{id}` = c.id AND t.`{claim_token}` = c.token
SET t.`{lease_expires_at}` = UTC_TIMESTAMP(6) + INTERVAL :lease_ms * 1000 MICROSECOND
WHERE t.`{state}` = 'processing'
