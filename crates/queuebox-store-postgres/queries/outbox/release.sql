-- Locking: the row locks of the fenced rows it releases. Isolation: READ COMMITTED.
-- Release at shutdown (OUT-58 step 2, SCH-15). READ COMMITTED, one statement for the batch.
-- Locking: row locks on the rows it releases only; a row being written by another transaction
-- is waited for and the fence re-checked on its new version.
-- Fence: id + claim token + state = 'processing' + lease not yet expired. attempt,
-- scheduled_at and last_error stay as they are (OUT-59).
-- :ids = ids, :tokens = claim tokens (same length).
-- The fence's state test reads IS NOT DISTINCT FROM (the same as = on this NOT NULL column) so
-- that no index on state can drive the statement: the statistics say almost no row is
-- processing, and the planner then scanned the processing range of the state index, which
-- keeps an entry for every row ever claimed until VACUUM, and hashed it against the ids
-- (11,077 buffers for 50 ids after 1M rows drained, 298 by the primary key; docs/benchmarks.md).
UPDATE "{outbox}" t
SET "{state}" = 'pending',
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL,
    "{updated_at}" = clock_timestamp()
FROM unnest(:ids::uuid[], :tokens::uuid[]) AS c(id, token)
WHERE t."{id}" = c.id
  AND t."{claim_token}" = c.token
  AND t."{state}" IS NOT DISTINCT FROM 'processing'
  AND t."{lease_expires_at}" > clock_timestamp()
RETURNING t."{id}", c.token
