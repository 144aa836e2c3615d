-- Locking: the row lock of the fenced inbox row, inside the forward transaction. Isolation: READ COMMITTED.
-- Forward, second statement (RLY-9 step 2, SCH-21): the fenced processed mark, in the same
-- transaction as forward_insert.sql. Locking: the row lock of the inbox row; a row being
-- written by another transaction (a reclaim) is waited for and the fence re-checked on its
-- committed version. Zero rows matched (the connection counts matched rows, CLIENT_FOUND_ROWS)
-- means the claim was lost and the caller rolls back the insert. claimed_at stays (SCH-16).
-- Fence: id + consumption = 'push' + claim token + state = 'processing' + lease not expired.
-- :id = id, :token = claim token.
UPDATE `{inbox}`
SET `{state}` = 'processed',
    `{processed_at}` = UTC_TIMESTAMP(6),
    `{claim_token}` = NULL,
    `{lease_expires_at}` = NULL
WHERE `{id}` = :id
  AND `{consumption}` = 'push'
  AND `{claim_token}` = :token
  AND `{state}` = 'processing'
  AND `{lease_expires_at}` > UTC_TIMESTAMP(6)
