-- Locking: the row lock of the fenced row. Isolation: READ COMMITTED.
-- Relay dead (RLY-9 step 1, SCH-21). READ COMMITTED, one statement. Locking: the row lock of
-- the row; a row being written meanwhile is waited for and the fence re-checked.
-- Fence: id + consumption = 'push' + claim token + state = 'processing' + lease not expired.
-- last_error is cut to 2000 characters (SCH-16).
-- :id = id, :token = claim token, :error = error text (already redacted).
-- The fence's state test reads IS NOT DISTINCT FROM (the same as = on this NOT NULL column) so
-- that no index on state can drive the statement: the statistics say almost no row is
-- processing, and the planner then scanned the processing range of the state index, which
-- keeps an entry for every row ever claimed until VACUUM, and hashed it against the ids
-- (11,077 buffers for 50 ids after 1M rows drained, 298 by the primary key; docs/benchmarks.md).
UPDATE "{inbox}"
SET "{state}" = 'dead',
    "{last_error}" = left(:error::text, 2000),
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL
WHERE "{id}" = :id::uuid
  AND "{consumption}" = 'push'
  AND "{claim_token}" = :token::uuid
  AND "{state}" IS NOT DISTINCT FROM 'processing'
  AND "{lease_expires_at}" > clock_timestamp()
