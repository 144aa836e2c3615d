-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Relay dead (RLY-9 step 1, SCH-21). Fence: id + consumption = 'push' + claim token + state =
-- 'processing' + lease not expired. last_error is cut to 2000 characters (SCH-16).
-- :id = id, :token = claim token, :error = error text (already redacted).
UPDATE "{inbox}"
SET "{state}" = 'dead',
    "{last_error}" = substr(:error, 1, 2000),
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL
WHERE "{id}" = :id
  AND "{consumption}" = 'push'
  AND "{claim_token}" = :token
  AND "{state}" = 'processing'
  AND "{lease_expires_at}" > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
