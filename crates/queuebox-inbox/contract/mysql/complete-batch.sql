-- Locking: row locks of the fenced rows, run INSIDE the one handler transaction of a batch handler, so every mark commits with the handler's writes or none does. :ids expands to one ? per id of the batch. Fenced per row exactly as complete.sql; the worker commits only when the count (rows matched, CLIENT_FOUND_ROWS) equals the number of ids.
UPDATE `{inbox}`
   SET `{state}` = 'processed', `{processed_at}` = UTC_TIMESTAMP(6),
       `{claim_token}` = NULL, `{lease_expires_at}` = NULL
 WHERE `{id}` IN (:ids) AND `{consumption}` = 'pull' AND `{state}` = 'processing'
   AND `{claim_token}` = :token AND `{lease_expires_at}` > UTC_TIMESTAMP(6)
