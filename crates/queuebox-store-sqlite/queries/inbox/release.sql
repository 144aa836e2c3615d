-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Relay release (RLY-12 with an error text, RLY-15 without), one statement for the batch.
-- Fence: id + consumption = 'push' + claim token + state = 'processing' + lease not expired.
-- attempt and scheduled_at stay; last_error is written only when an error is given.
-- :claims = JSON array of {"id", "token"}, :error = error text or NULL.
UPDATE "{inbox}" AS t
SET "{state}" = 'pending',
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL,
    "{last_error}" = CASE WHEN :error IS NULL THEN t."{last_error}" ELSE substr(:error, 1, 2000) END
FROM (SELECT j.value ->> '$.id' AS id, j.value ->> '$.token' AS token
      FROM json_each(:claims) j) AS c
WHERE t."{id}" = c.id
  AND t."{consumption}" = 'push'
  AND t."{claim_token}" = c.token
  AND t."{state}" = 'processing'
  AND t."{lease_expires_at}" > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
RETURNING "{id}"
