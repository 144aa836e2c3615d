-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Relay renew (RLY-7), one statement for the batch, the claims as one JSON array of
-- {"id", "token"} objects. Fence: id + consumption = 'push' + claim token + state =
-- 'processing' + lease not expired.
-- :claims = JSON array of claims, :lease_ms = lease in ms.
UPDATE "{inbox}" AS t
SET "{lease_expires_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', :lease_ms / 1000.0))
FROM (SELECT j.value ->> '$.id' AS id, j.value ->> '$.token' AS token
      FROM json_each(:claims) j) AS c
WHERE t."{id}" = c.id
  AND t."{consumption}" = 'push'
  AND t."{claim_token}" = c.token
  AND t."{state}" = 'processing'
  AND t."{lease_expires_at}" > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
RETURNING "{id}"
