-- Locking: INSIDE the handler transaction, which began with BEGIN IMMEDIATE and so holds the write lock from its start (PULL-28, PULL-40). Fenced on the token without the lease: no other connection could write while the handler ran, so an unchanged token means nobody took the row (PULL-8).
UPDATE "{inbox}"
   SET "{state}" = 'processed', "{processed_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
       "{claim_token}" = NULL, "{lease_expires_at}" = NULL
 WHERE "{id}" = :id AND "{consumption}" = 'pull' AND "{state}" = 'processing'
   AND "{claim_token}" = :token
