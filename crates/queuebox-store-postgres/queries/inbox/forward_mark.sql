-- Locking: the row lock of the fenced inbox row, inside the forward transaction. Isolation: READ COMMITTED.
-- Forward, second statement (RLY-9 step 2, SCH-21): the fenced processed mark, in the same
-- transaction as forward_insert.sql. Locking: the row lock of the inbox row; a row being
-- written by another transaction (a reclaim) is waited for and the fence re-checked on its new
-- version. Zero rows changed means the claim was lost and the caller rolls back the insert.
-- claimed_at stays: it is when the row was last claimed (SCH-16).
-- Fence: id + consumption = 'push' + claim token + state = 'processing' + lease not expired.
-- :id = id, :token = claim token.
-- The fence's state test reads IS NOT DISTINCT FROM (the same as = on this NOT NULL column) so
-- that no index on state can drive the statement: the statistics say almost no row is
-- processing, and the planner then scanned the processing range of the state index, which
-- keeps an entry for every row ever claimed until VACUUM, and hashed it against the ids
-- (11,077 buffers for 50 ids after 1M rows drained, 298 by the primary key; docs/benchmarks.md).
UPDATE "{inbox}"
SET "{state}" = 'processed',
    "{processed_at}" = clock_timestamp(),
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL
WHERE "{id}" = :id::uuid
  AND "{consumption}" = 'push'
  AND "{claim_token}" = :token::uuid
  AND "{state}" IS NOT DISTINCT FROM 'processing'
  AND "{lease_expires_at}" > clock_timestamp()
