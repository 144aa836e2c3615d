-- Locking: the row lock of the fenced row. Isolation: READ COMMITTED.
-- Relay dead (RLY-9 step 1, SCH-21), one statement. Locking: the row lock of the row; a row
-- being written meanwhile is waited for and the fence re-checked on its committed version.
-- Fence: id + consumption = 'push' + claim token + state = 'processing' + lease not expired.
-- last_error is cut to 2000 characters (SCH-16).
-- :id = id, :token = claim token, :error = error text (already redacted).
UPDATE `{inbox}`
SET `{state}` = 'dead',
    `{last_error}` = LEFT(:error, 2000),
    `{claim_token}` = NULL,
    `{lease_expires_at}` = NULL
WHERE `{id}` = :id
  AND `{consumption}` = 'push'
  AND `{claim_token}` = :token
  AND `{state}` = 'processing'
  AND `{lease_expires_at}` > UTC_TIMESTAMP(6)
