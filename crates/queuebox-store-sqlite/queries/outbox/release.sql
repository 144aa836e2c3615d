-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Release at shutdown (OUT-58 step 2, SCH-15), one statement for the batch, the claims as one
-- JSON array of {"id", "token"} objects. Fence: id + claim token + state = 'processing' +
-- lease not yet expired. attempt, scheduled_at and last_error stay as they are (OUT-59).
-- :claims = JSON array of claims.
UPDATE "{outbox}" AS t
SET "{state}" = 'pending',
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL,
    "{updated_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
FROM (SELECT j.value ->> '$.id' AS id, j.value ->> '$.token' AS token
      FROM json_each(:claims) j) AS c
WHERE t."{id}" = c.id
  AND t."{claim_token}" = c.token
  AND t."{state}" = 'processing'
  AND t."{lease_expires_at}" > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
RETURNING "{id}"
