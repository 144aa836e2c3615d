-- Locking: row lock of the one fenced row, autocommit on a new connection, OUTSIDE the rolled-back handler transaction (PULL-46).
UPDATE `{inbox}`
   SET `{state}` = 'dead', `{attempt}` = `{attempt}` + 1, `{last_error}` = :error,
       `{claim_token}` = NULL, `{lease_expires_at}` = NULL
 WHERE `{id}` = :id AND `{consumption}` = 'pull' AND `{state}` = 'processing'
   AND `{claim_token}` = :token AND `{lease_expires_at}` > UTC_TIMESTAMP(6)
