-- Locking: FOR UPDATE on the fenced rows, in the transaction of the write that follows. Isolation: READ COMMITTED.
-- Fence of a batch write (OUT-41): which of the given claims still hold, locked until the
-- write's COMMIT. MySQL has no UPDATE ... RETURNING, so renew.sql, finish.sql and release.sql
-- run in a short transaction after this read and change exactly the rows it returned: the
-- locks keep any other writer (a reclaim, another owner) away in between. A row being written
-- by another transaction is waited for and read in its committed version.
-- Fence: id + claim token + state = 'processing' + lease not yet expired.
-- :claims = JSON array of {"id", "token"}.
-- Plan: the JSON array is read first (STRAIGHT_JOIN) and each of its rows finds its table row
-- through the unique index on id (FORCE INDEX), so the statement locks and waits for those
-- rows only, never for a row another transaction holds, however small the table.
SELECT t.`{id}`, t.`{claim_token}`
FROM JSON_TABLE(:claims, '$[*]' COLUMNS (
         id    CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
         token CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.token')) c
STRAIGHT_JOIN `{outbox}` t FORCE INDEX (`{outbox_id_index}`)
  ON t.`{id}` = c.id AND t.`{claim_token}` = c.token
WHERE t.`{state}` = 'processing'
  AND t.`{lease_expires_at}` > UTC_TIMESTAMP(6)
FOR UPDATE
