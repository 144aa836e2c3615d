-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Relay reclaim of expired leases (RLY-8, INB-3), not fenced: it matches expired push leases
-- only, and never touches a pull row (the pull claim takes over expired pull leases itself).
-- attempt, scheduled_at and last_error stay as they are.
UPDATE "{inbox}"
SET "{state}" = 'pending',
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL
WHERE "{consumption}" = 'push'
  AND "{state}" = 'processing'
  AND "{lease_expires_at}" <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
