-- Locking: the row locks of the fenced rows it writes. Isolation: READ COMMITTED.
-- Terminal writes (OUT-28, OUT-31, OUT-41, SCH-15). READ COMMITTED, one statement for the
-- whole batch of mixed outcomes. Locking: row locks on the rows it writes only; a row being
-- written by another transaction is waited for and the fence re-checked on its new version.
-- Fence: id + claim token + state = 'processing' + lease not yet expired.
-- Outcome codes: 0 = sent, 1 = retry (back to pending), 2 = dead. The CASE turns each into a
-- state literal (SCH-9); an unknown code yields NULL, which the NOT NULL column refuses.
-- Sent leaves attempt, scheduled_at and last_error alone; retry and dead write the given
-- attempt and error (cut to 2000 characters); only retry moves scheduled_at. A retry without
-- an error is a hold by the destination guard: it keeps last_error, the last real failure.
-- :ids = ids, :tokens = tokens, :outcomes = outcome codes, :attempts = attempts, :delays_ms = retry delays in ms,
-- :errors = error texts (all arrays of one length).
-- The fence's state test reads IS NOT DISTINCT FROM (the same as = on this NOT NULL column) so
-- that no index on state can drive the statement: the statistics say almost no row is
-- processing, and the planner then scanned the processing range of the state index, which
-- keeps an entry for every row ever claimed until VACUUM, and hashed it against the ids
-- (11,077 buffers for 50 ids after 1M rows drained, 298 by the primary key; docs/benchmarks.md).
-- Each array is read through a scalar sub-select, so the planner never sees its length: with
-- the arrays as plain parameters every execution was planned anew (a custom plan costed for
-- the exact length always looked cheaper than the generic one), 0.2 ms of planning for a
-- statement that runs in 0.16 ms, once a row when one key drains row after row. So the
-- prepared statement keeps its generic plan after five executions. A generic plan made on a
-- small table is a sequential scan, so the store prepares this statement again on each
-- connection every few seconds (src/replan.rs).
UPDATE "{outbox}" t
SET "{state}" = CASE w.outcome WHEN 0 THEN 'sent' WHEN 1 THEN 'pending' WHEN 2 THEN 'dead' END,
    "{attempt}" = CASE WHEN w.outcome = 0 THEN t."{attempt}" ELSE w.attempt END,
    "{scheduled_at}" = CASE WHEN w.outcome = 1
                         THEN clock_timestamp() + w.delay_ms * INTERVAL '1 millisecond'
                         ELSE t."{scheduled_at}" END,
    "{last_error}" = CASE WHEN w.outcome = 0 OR w.error IS NULL THEN t."{last_error}" ELSE left(w.error, 2000) END,
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL,
    "{updated_at}" = clock_timestamp()
FROM unnest((SELECT :ids::uuid[]), (SELECT :tokens::uuid[]), (SELECT :outcomes::int4[]),
            (SELECT :attempts::int4[]), (SELECT :delays_ms::int8[]), (SELECT :errors::text[]))
     AS w(id, token, outcome, attempt, delay_ms, error)
WHERE t."{id}" = w.id
  AND t."{claim_token}" = w.token
  AND t."{state}" IS NOT DISTINCT FROM 'processing'
  AND t."{lease_expires_at}" > clock_timestamp()
RETURNING t."{id}", w.token
