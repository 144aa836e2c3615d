-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Run claim (OUT-13a, issue 16 item 4), one statement per run inside one BEGIN IMMEDIATE.
-- The row the run follows must still be held by this claim (fence: id + token + state =
-- 'processing' + lease not expired, as OUT-41). While it is `processing`, no later row of its
-- key is the head of the key (OUT-13), so the run reads the next :limit rows of the key in
-- sequence order from idx_outbox_key_sequence and claims those before the first row that is
-- not pending and due: a run never skips a row. Tokens as in claim.sql. RETURNING comes back
-- in no particular order: the store orders the answer by sequence.
-- :id, :token = the claim the run follows, :limit = rows it may take, :lease_ms = lease in ms.
WITH tail AS (
    SELECT t."{key}" AS k, t."{sequence}" AS seq
    FROM "{outbox}" t
    WHERE t."{id}" = :id
      AND t."{claim_token}" = :token
      AND t."{state}" = 'processing'
      AND t."{lease_expires_at}" > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
      AND t."{key}" <> ''
),
nxt AS (
    SELECT o."{id}" AS id, o."{sequence}" AS seq,
           (o."{state}" = 'pending'
            AND o."{scheduled_at}" <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) AS ok
    FROM "{outbox}" o, tail
    WHERE o."{key}" = tail.k
      AND o."{state}" IN ('pending', 'processing')
      AND o."{sequence}" > tail.seq
    ORDER BY o."{sequence}"
    LIMIT :limit
)
UPDATE "{outbox}"
SET "{state}" = 'processing',
    "{claim_token}" = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' ||
                      substr(hex(randomblob(2)), 2) || '-' ||
                      substr('89ab', 1 + (abs(random()) % 4), 1) ||
                      substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
    "{claimed_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
    "{lease_expires_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', :lease_ms / 1000.0)),
    "{updated_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
WHERE "{id}" IN (
        SELECT x.id FROM nxt x
        WHERE NOT EXISTS (SELECT 1 FROM nxt y WHERE y.seq <= x.seq AND NOT y.ok))
  AND "{state}" = 'pending'
RETURNING "{id}", "{claim_token}", "{topic}", NULLIF("{key}", ''), "{payload}", "{headers}",
          "{aggregate_type}", "{attempt}", "{max_attempts}", "{sequence}"
