-- Locking: autocommit on a new connection (its own short write transaction), OUTSIDE the rolled-back handler transaction (PULL-46). Fenced on the token without the lease (PULL-8, PULL-28).
UPDATE "{inbox}"
   SET "{state}" = 'dead', "{attempt}" = "{attempt}" + 1, "{last_error}" = :error,
       "{claim_token}" = NULL, "{lease_expires_at}" = NULL
 WHERE "{id}" = :id AND "{consumption}" = 'pull' AND "{state}" = 'processing'
   AND "{claim_token}" = :token
