-- Locking: row lock of the one fenced row, run INSIDE the handler transaction so the mark commits with the handler's writes (PULL-40/41). Isolation: any; an UPDATE reads the latest committed row, so it sees a newer token or an expired lease (PULL-27).
UPDATE `{inbox}`
   SET `{state}` = 'processed', `{processed_at}` = UTC_TIMESTAMP(6),
       `{claim_token}` = NULL, `{lease_expires_at}` = NULL
 WHERE `{id}` = :id AND `{consumption}` = 'pull' AND `{state}` = 'processing'
   AND `{claim_token}` = :token AND `{lease_expires_at}` > UTC_TIMESTAMP(6)
