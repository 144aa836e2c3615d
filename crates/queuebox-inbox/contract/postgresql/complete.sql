-- Locking: row lock of the one fenced row, run INSIDE the handler transaction so the mark commits with the handler's writes (PULL-40/41). Isolation: the connection default (READ COMMITTED); under REPEATABLE READ/SERIALIZABLE a takeover may raise a serialization error instead of 0 rows (PULL-42).
UPDATE "{inbox}"
   SET "{state}" = 'processed', "{processed_at}" = clock_timestamp(),
       "{claim_token}" = NULL, "{lease_expires_at}" = NULL
 WHERE "{id}" = :id AND "{consumption}" = 'pull' AND "{state}" = 'processing'
   AND "{claim_token}" = :token AND "{lease_expires_at}" > clock_timestamp()
