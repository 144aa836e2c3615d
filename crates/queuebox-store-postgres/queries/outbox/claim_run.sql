-- Locking: FOR UPDATE on the row each run follows and on the rows it claims, never SKIP LOCKED. Isolation: READ COMMITTED.
-- Run claim (OUT-13a, issue 16 item 4), one statement. For each run: the row it follows must
-- still be held by this claim (fence: id + token + state = 'processing' + lease not expired,
-- as OUT-41), and it is locked, so a reclaim or another owner cannot change it meanwhile
-- (FOR UPDATE re-checks the fence on the newest version). While that row is `processing`, no
-- later row of its key is the head of the key (OUT-13 rules 2 and 3), so no other claimer
-- can take the rows read here: the run reads the next :limits rows of the key in sequence
-- order from idx_outbox_key_sequence (one index range, so its cost does not grow with the
-- backlog of the key), and keeps those before the first row that is not pending and due. A
-- run never skips a row (no SKIP LOCKED): it waits for a row another transaction holds (an
-- operator's delete), and the UPDATE's state = 'pending' re-check drops a row deleted
-- meanwhile, which is then gone from the key anyway.
-- The clock is read once, so every row of one run claim has the same claimed_at and lease end.
-- :ids, :tokens = the claims the runs follow; :limits = rows each run may take (bigint[]);
-- :lease_ms = lease in milliseconds (bigint).
-- The fence's state test reads IS NOT DISTINCT FROM (the same as = on this NOT NULL column) so
-- that no index on state can drive the statement: the statistics say almost no row is
-- processing, and the planner then scanned the processing range of the state index, which
-- keeps an entry for every row ever claimed until VACUUM, and hashed it against the ids
-- (11,077 buffers for 50 ids after 1M rows drained, 298 by the primary key; docs/benchmarks.md).
-- The rows it claims are read by the primary key from an array of their ids (`= ANY (ARRAY(...))`,
-- which the planner takes for about ten ids). Joined to the CTE instead, they were planned as
-- a hash join over a sequential scan of every pending row, because nothing bounds the CTE's
-- estimate: with 50,000 pending rows of one key, 6,685 buffers and 67 ms for a run of 31 rows,
-- against 1,101 buffers and 4 ms now, so one key's backlog drained in quadratic time again.
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS at),
tails AS MATERIALIZED (
    SELECT t."{id}" AS id, t."{key}" AS key, t."{sequence}" AS seq, c.n
    FROM unnest(:ids::uuid[], :tokens::uuid[], :limits::bigint[]) AS c(id, token, n)
    JOIN "{outbox}" t ON t."{id}" = c.id
    WHERE t."{claim_token}" = c.token
      AND t."{state}" IS NOT DISTINCT FROM 'processing'
      AND t."{lease_expires_at}" > clock_timestamp()
      AND t."{key}" <> ''
      AND c.n > 0
    FOR UPDATE OF t
),
nxt AS MATERIALIZED (
    SELECT x.id, x.seq, x.ok, tl.id AS tail
    FROM tails tl
    CROSS JOIN LATERAL (
        SELECT o."{id}" AS id, o."{sequence}" AS seq,
               (o."{state}" = 'pending' AND o."{scheduled_at}" <= clock_timestamp()) AS ok
        FROM "{outbox}" o
        WHERE o."{key}" = tl.key
          AND o."{state}" IN ('pending', 'processing')
          AND o."{sequence}" > tl.seq
        ORDER BY o."{sequence}"
        LIMIT tl.n
    ) x
),
picked AS (
    SELECT x.id FROM nxt x
    WHERE NOT EXISTS (SELECT 1 FROM nxt y
                      WHERE y.tail = x.tail AND y.seq <= x.seq AND NOT y.ok)
),
candidates AS MATERIALIZED (
    SELECT o."{id}"
    FROM "{outbox}" o
    WHERE o."{id}" = ANY (ARRAY(SELECT p.id FROM picked p))
      AND o."{state}" = 'pending'
    FOR UPDATE OF o
),
claimed AS (
    UPDATE "{outbox}" t
    SET "{state}" = 'processing',
        "{claim_token}" = gen_random_uuid(),
        "{claimed_at}" = k.at,
        "{lease_expires_at}" = k.at + :lease_ms::bigint * INTERVAL '1 millisecond',
        "{updated_at}" = k.at
    FROM clock k
    WHERE t."{id}" = ANY (ARRAY(SELECT c."{id}" FROM candidates c)) AND t."{state}" = 'pending'
    RETURNING t."{id}" AS id,
              t."{claim_token}" AS claim_token,
              t."{topic}"::text AS topic,
              NULLIF(t."{key}", '')::text AS key,
              t."{payload}"::text AS payload,
              t."{headers}"::text AS headers,
              t."{aggregate_type}"::text AS aggregate_type,
              t."{attempt}" AS attempt,
              t."{max_attempts}" AS max_attempts,
              t."{sequence}" AS sequence
)
SELECT id, claim_token, topic, key, payload, headers, aggregate_type, attempt, max_attempts,
       sequence
FROM claimed
ORDER BY key, sequence
