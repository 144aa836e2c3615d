-- Relay renew (RLY-7). READ COMMITTED, one statement for the whole batch. Locking: row locks on
-- the rows it renews only; a row being written by another transaction is waited for and the
-- fence re-checked on its new version, so a renewal never revives a forwarded or reclaimed row.
-- Fence: id + consumption = 'push' + claim token + state = 'processing' + lease not expired.
-- $1 = ids, $2 = claim tokens (same length), $3 = lease in milliseconds.
UPDATE {inbox} t
SET {lease_expires_at} = clock_timestamp() + $3::bigint * INTERVAL '1 millisecond'
FROM unnest($1::uuid[], $2::uuid[]) AS c(id, token)
WHERE t.{id} = c.id
  AND t.{consumption} = 'push'
  AND t.{claim_token} = c.token
  AND t.{state} = 'processing'
  AND t.{lease_expires_at} > clock_timestamp()
RETURNING t.{id}, c.token
