-- Locking: the database write lock (BEGIN IMMEDIATE), in the forward transaction. Isolation: serializable.
-- Forward, first statement (RLY-9 step 2, SCH-21): the fenced processed mark. Zero rows
-- changed means the claim was lost: the caller rolls back and inserts nothing. claimed_at
-- stays: it is when the row was last claimed (SCH-16).
-- Fence: id + consumption = 'push' + claim token + state = 'processing' + lease not expired.
-- :id = id, :token = claim token.
UPDATE "{inbox}"
SET "{state}" = 'processed',
    "{processed_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL
WHERE "{id}" = :id
  AND "{consumption}" = 'push'
  AND "{claim_token}" = :token
  AND "{state}" = 'processing'
  AND "{lease_expires_at}" > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
