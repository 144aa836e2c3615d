-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Reclaim of expired leases (OUT-46/47, SCH-15), one statement, not fenced: it matches expired
-- leases only, so any process on the file may run it. attempt, scheduled_at and last_error
-- stay as they are (OUT-27).
UPDATE "{outbox}"
SET "{state}" = 'pending',
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL,
    "{updated_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
WHERE "{state}" = 'processing'
  AND "{lease_expires_at}" <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
