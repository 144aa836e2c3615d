-- Locking: the row locks of the fenced rows it renews. Isolation: READ COMMITTED.
-- Relay renew (RLY-7). READ COMMITTED, one statement for the whole batch. Locking: row locks on
-- the rows it renews only; a row being written by another transaction is waited for and the
-- fence re-checked on its new version, so a renewal never revives a forwarded or reclaimed row.
-- Fence: id + consumption = 'push' + claim token + state = 'processing' + lease not expired.
-- :ids = ids, :tokens = claim tokens (same length), :lease_ms = lease in milliseconds.
-- The fence's state test reads IS NOT DISTINCT FROM (the same as = on this NOT NULL column) so
-- that no index on state can drive the statement: the statistics say almost no row is
-- processing, and the planner then scanned the processing range of the state index, which
-- keeps an entry for every row ever claimed until VACUUM, and hashed it against the ids
-- (11,077 buffers for 50 ids after 1M rows drained, 298 by the primary key; docs/benchmarks.md).
UPDATE "{inbox}" t
SET "{lease_expires_at}" = clock_timestamp() + :lease_ms::bigint * INTERVAL '1 millisecond'
FROM unnest(:ids::uuid[], :tokens::uuid[]) AS c(id, token)
WHERE t."{id}" = c.id
  AND t."{consumption}" = 'push'
  AND t."{claim_token}" = c.token
  AND t."{state}" IS NOT DISTINCT FROM 'processing'
  AND t."{lease_expires_at}" > clock_timestamp()
RETURNING t."{id}", c.token
