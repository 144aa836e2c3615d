-- Locking: candidate rows FOR UPDATE SKIP LOCKED, then the row locks of the rows it claims. Isolation: READ COMMITTED.
-- Claim (OUT-11..17). READ COMMITTED, one statement, so the whole batch commits at once.
-- Locking: the candidate rows are taken FOR UPDATE SKIP LOCKED, so concurrent claimers never
-- wait on each other and never take the same row. The head-of-key test takes no lock and skips
-- nothing: it sees every committed pending/processing row of the key (OUT-14), so only the
-- lowest-sequence row of a key with nothing in processing can be a candidate, and one statement
-- takes at most one row per key. The UPDATE repeats state = 'pending', so a row that changed
-- after the candidate read is dropped. The outer SELECT only orders the answer.
--
-- Its cost does not grow with the backlog of one key (issue 16 item 4, docs/benchmarks.md).
-- Testing every pending row in (scheduled_at, sequence) order for "is the head of its key"
-- made one key with 200,000 pending rows cost 0.8-1 s per claim (199,999 rows tested to find
-- one head), so a key's backlog drained in quadratic time. Instead:
-- 1. `win`: the first :limit * 4 due pending rows in claim order (an index range of
--    idx_outbox_pending that stops there). Keyless rows are candidates; of each key only its
--    first row in the window can be its head, and only that one is tested, lazily in claim
--    order, with a min() over idx_outbox_key_sequence (one index probe) and the hashed set of
--    busy keys (OUT-13 rule 3). So a window full of one key's rows costs one probe.
-- 2. `more`, read only when the window did not yield :limit rows and was full: the rows after
--    the window in claim order that a full-table head test would also take. The heads of the
--    keys come from a loose index scan of idx_outbox_key_sequence (one probe per key, at most
--    :limit * 10 keys in key order); keyless rows from the NULL and '' ranges of the same index
--    in sequence order. They are taken in claim order among what these reads reached
--    (docs/benchmarks.md, "One hot key"), so a backlog at the front of the table never hides
--    the rows behind it.
-- `picked` is MATERIALIZED so it is computed once whatever the statistics say. Without them (a
-- new or never-analyzed table, autovacuum off) the planner joined it to the pending rows in a
-- nested loop that ran the whole head-of-key test again for every pending row: 13,800 buffer
-- hits and 21 ms for a claim of 100 rows in a table of 600, against about 2,300 hits once.
-- `candidates` and the UPDATE read their rows by the primary key from an array of ids, as
-- claim_run.sql does and for its reason: a join to a CTE can be planned as a hash join over
-- every pending row.
-- The clock is read once, so every row of one claim has the same claimed_at and lease end (the
-- benchmark groups by claimed_at for the claim-size distribution).
-- :limit = rows requested (bigint), :lease_ms = lease in milliseconds (bigint).
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS at),
busy AS MATERIALIZED (
    SELECT DISTINCT b."{key}" AS key
    FROM "{outbox}" b
    WHERE b."{state}" = 'processing' AND b."{key}" IS NOT NULL AND b."{key}" <> ''
),
win AS MATERIALIZED (
    SELECT o."{id}" AS id, o."{key}" AS key, o."{sequence}" AS seq, o."{scheduled_at}" AS due
    FROM "{outbox}" o
    WHERE o."{state}" = 'pending'
      AND o."{scheduled_at}" <= clock_timestamp()
    ORDER BY o."{scheduled_at}", o."{sequence}"
    LIMIT :limit::bigint * 4
),
edge AS MATERIALIZED (
    SELECT w.due, w.seq FROM win w
    ORDER BY w.due, w.seq
    OFFSET :limit::bigint * 4 - 1
    LIMIT 1
),
firsts AS (
    SELECT f.id, f.key, f.seq, f.due FROM (
        SELECT w.id, w.key, w.seq, w.due FROM win w
        WHERE w.key IS NULL OR w.key = ''
        UNION ALL
        (SELECT DISTINCT ON (w.key) w.id, w.key, w.seq, w.due FROM win w
         WHERE w.key <> ''
         ORDER BY w.key, w.seq)
    ) f
    ORDER BY f.due, f.seq
    OFFSET 0
),
win_ok AS (
    SELECT f.id FROM firsts f
    WHERE f.key IS NULL OR f.key = ''
       OR (f.key NOT IN (SELECT key FROM busy)
           AND f.seq = (SELECT min(p."{sequence}") FROM "{outbox}" p
                        WHERE p."{key}" = f.key AND p."{state}" IN ('pending', 'processing')))
),
more AS (
    SELECT m.id FROM (
        SELECT h.id, h.due, h.seq FROM (
            WITH RECURSIVE heads AS (
                (SELECT p."{key}" AS key, p."{id}" AS id, p."{state}" AS state,
                        p."{sequence}" AS seq, p."{scheduled_at}" AS due
                 FROM "{outbox}" p
                 WHERE p."{state}" IN ('pending', 'processing') AND p."{key}" > ''
                 ORDER BY p."{key}", p."{sequence}"
                 LIMIT 1)
                UNION ALL
                SELECT n.key, n.id, n.state, n.seq, n.due
                FROM heads r,
                     LATERAL (SELECT p."{key}" AS key, p."{id}" AS id, p."{state}" AS state,
                                     p."{sequence}" AS seq, p."{scheduled_at}" AS due
                              FROM "{outbox}" p
                              WHERE p."{state}" IN ('pending', 'processing')
                                AND p."{key}" > r.key
                              ORDER BY p."{key}", p."{sequence}"
                              LIMIT 1) n
            )
            SELECT * FROM heads LIMIT :limit::bigint * 10
        ) h
        WHERE h.state = 'pending'
          AND h.due <= clock_timestamp()
          AND h.key NOT IN (SELECT key FROM busy)
          AND (h.due, h.seq) > (SELECT e.due, e.seq FROM edge e)
        UNION ALL
        (SELECT q."{id}", q."{scheduled_at}", q."{sequence}" FROM "{outbox}" q
         WHERE q."{key}" IS NULL AND q."{state}" IN ('pending', 'processing')
           AND q."{state}" = 'pending' AND q."{scheduled_at}" <= clock_timestamp()
           AND (q."{scheduled_at}", q."{sequence}") > (SELECT e.due, e.seq FROM edge e)
         ORDER BY q."{key}", q."{sequence}"
         LIMIT :limit::bigint)
        UNION ALL
        (SELECT q."{id}", q."{scheduled_at}", q."{sequence}" FROM "{outbox}" q
         WHERE q."{key}" = '' AND q."{state}" IN ('pending', 'processing')
           AND q."{state}" = 'pending' AND q."{scheduled_at}" <= clock_timestamp()
           AND (q."{scheduled_at}", q."{sequence}") > (SELECT e.due, e.seq FROM edge e)
         ORDER BY q."{key}", q."{sequence}"
         LIMIT :limit::bigint)
    ) m
    ORDER BY m.due, m.seq
),
picked AS MATERIALIZED (
    SELECT u.id FROM ((SELECT id FROM win_ok) UNION ALL (SELECT id FROM more)) u
    LIMIT :limit::bigint
),
candidates AS MATERIALIZED (
    SELECT o."{id}"
    FROM "{outbox}" o
    WHERE o."{id}" = ANY (ARRAY(SELECT p.id FROM picked p))
      AND o."{state}" = 'pending'
    FOR UPDATE OF o SKIP LOCKED
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
              t."{sequence}" AS sequence,
              t."{scheduled_at}" AS scheduled_at
)
SELECT id, claim_token, topic, key, payload, headers, aggregate_type, attempt, max_attempts,
       sequence
FROM claimed
ORDER BY scheduled_at, sequence
