-- Locking: autocommit on its own connection (PULL-44). The SQLite worker runs no renewal (PULL-28): while a handler transaction holds the write lock no other connection can write; the statement exists for the contract (PULL-C11).
UPDATE "{inbox}"
   SET "{lease_expires_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', :lease_ms / 1000.0))
 WHERE "{id}" = :id AND "{consumption}" = 'pull' AND "{state}" = 'processing'
   AND "{claim_token}" = :token AND "{lease_expires_at}" > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
