-- Locking: the row locks of the expired push rows nobody else holds (SKIP LOCKED). Isolation: READ COMMITTED.
-- Relay reclaim of expired leases (RLY-8, INB-3). READ COMMITTED, one statement, not fenced:
-- it matches expired push leases only, so any replica may run it, and it never touches a pull
-- row (the pull claim takes over expired pull leases itself). Locking: the expired rows are
-- taken FOR UPDATE SKIP LOCKED, so a row that another session holds (a stalled replica's open
-- forward transaction, an operator's SELECT ... FOR UPDATE) is left for a later reclaim instead
-- of being waited for: one frozen replica must not stop the relay of every other one. The
-- UPDATE repeats the tests, so a row that left processing after the read is not touched.
-- attempt, scheduled_at and last_error stay as they are.
-- The fence's state test reads IS NOT DISTINCT FROM (the same as = on this NOT NULL column) so
-- that no index on state can drive the statement: the statistics say almost no row is
-- processing, and the planner then scanned the processing range of the state index, which
-- keeps an entry for every row ever claimed until VACUUM, and hashed it against the ids
-- (11,077 buffers for 50 ids after 1M rows drained, 298 by the primary key; docs/benchmarks.md).
WITH expired AS MATERIALIZED (
    SELECT e."{id}" AS id
    FROM "{inbox}" e
    WHERE e."{consumption}" = 'push'
      AND e."{state}" = 'processing'
      AND e."{lease_expires_at}" <= clock_timestamp()
    FOR UPDATE OF e SKIP LOCKED
)
UPDATE "{inbox}" t
SET "{state}" = 'pending',
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL
FROM expired x
WHERE t."{id}" = x.id
  AND t."{consumption}" = 'push'
  AND t."{state}" IS NOT DISTINCT FROM 'processing'
  AND t."{lease_expires_at}" <= clock_timestamp()
