-- Locking: FOR UPDATE on the rows the runs follow, in the run claim transaction. Isolation: READ COMMITTED.
-- Run claim, first statement (OUT-13a, issue 16 item 4): which of the given claims still hold
-- (fence: id + claim token + state = 'processing' + lease not yet expired, as OUT-41) and have
-- a key, with that key and sequence. The locks keep a reclaim or another owner away until the
-- COMMIT, so while the run claim runs no later row of these keys can become a head (OUT-13).
-- :claims = JSON array of {"id", "token"}.
-- Plan: as fence.sql, the JSON array first and the unique index on id for each row.
SELECT t.`{id}`, t.`{key}`, t.`{sequence}`
FROM JSON_TABLE(:claims, '$[*]' COLUMNS (
         id    CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
         token CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.token')) c
STRAIGHT_JOIN `{outbox}` t FORCE INDEX (`{outbox_id_index}`)
  ON t.`{id}` = c.id AND t.`{claim_token}` = c.token
WHERE t.`{state}` = 'processing'
  AND t.`{lease_expires_at}` > UTC_TIMESTAMP(6)
  AND t.`{key}` <> ''
FOR UPDATE
