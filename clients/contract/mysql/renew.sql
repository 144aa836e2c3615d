-- Locking: row lock of the one fenced row, autocommit on its own connection, never inside the handler transaction (PULL-44). The client connects with CLIENT_FOUND_ROWS, so an identical value still reports 1 (PULL-10).
UPDATE `{inbox}`
   SET `{lease_expires_at}` = UTC_TIMESTAMP(6) + INTERVAL :lease_ms * 1000 MICROSECOND
 WHERE `{id}` = :id AND `{consumption}` = 'pull' AND `{state}` = 'processing'
   AND `{claim_token}` = :token AND `{lease_expires_at}` > UTC_TIMESTAMP(6)
