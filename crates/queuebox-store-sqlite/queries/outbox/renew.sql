-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Renew (OUT-40/41), one statement for the whole batch; the claims travel as one JSON array
-- of {"id", "token"} objects. Fence: id + claim token + state = 'processing' + lease not yet
-- expired, so a renewal never revives a finished or reclaimed row. RETURNING names the rows
-- renewed; the store pairs them with their tokens.
-- :claims = JSON array of claims, :lease_ms = lease in milliseconds.
UPDATE "{outbox}" AS t
SET "{lease_expires_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', :lease_ms / 1000.0))
FROM (SELECT j.value ->> '$.id' AS id, j.value ->> '$.token' AS token
      FROM json_each(:claims) j) AS c
WHERE t."{id}" = c.id
  AND t."{claim_token}" = c.token
  AND t."{state}" = 'processing'
  AND t."{lease_expires_at}" > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
RETURNING "{id}"
