-- Locking: FOR UPDATE on the fenced rows, in the transaction of the write that follows. Isolation: READ COMMITTED.
-- Fence of a relay batch write (RLY-7): which of the given claims still hold, locked until
-- the write's COMMIT; renew.sql and release.sql then change exactly these rows (no UPDATE ...
-- RETURNING on MySQL). A row being written by another transaction is waited for and read in
-- its committed version.
-- Fence: id + consumption = 'push' + claim token + state = 'processing' + lease not expired.
-- :claims = JSON array of {"id", "token"}.
-- Plan: the JSON array is read first (STRAIGHT_JOIN) and each of its rows finds its table row
-- through the unique index on id (FORCE INDEX), so the statement locks and waits for those
-- rows only, never for a row another transaction holds, however small the table.
SELECT t.`{id}`, t.`{claim_token}`
FROM JSON_TABLE(:claims, '$[*]' COLUMNS (
         id    CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
         token CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.token')) c
STRAIGHT_JOIN `{inbox}` t FORCE INDEX (`{inbox_id_index}`)
  ON t.`{id}` = c.id AND t.`{claim_token}` = c.token
WHERE t.`{consumption}` = 'push'
  AND t.`{state}` = 'processing'
  AND t.`{lease_expires_at}` > UTC_TIMESTAMP(6)
FOR UPDATE
