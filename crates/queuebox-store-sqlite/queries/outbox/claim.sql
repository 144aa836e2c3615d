-- Locking: the database write lock (BEGIN IMMEDIATE), held for this one statement. Isolation: serializable.
-- Claim (OUT-11..17). One UPDATE ... RETURNING inside BEGIN IMMEDIATE (outbox.md OUT-17): the
-- write lock serializes claimers, so no row locking is needed and the head-of-key test sees
-- every committed pending/processing row of the key (OUT-14). Only the lowest-sequence row of
-- a key with nothing in processing can be a candidate, so one statement takes at most one row
-- per key; keyless rows (NULL or empty) go freely. SQLite's 'now' is one instant for the whole
-- statement, so claimed_at, updated_at and the lease start are equal. RETURNING comes back in
-- no particular order: the store orders the answer by (scheduled_at, sequence).
-- The token is a random UUID (version 4 form, lower-case text), one per row.
-- :limit = rows requested, :lease_ms = lease in milliseconds.
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
        SELECT o."{id}"
        FROM "{outbox}" o
        WHERE o."{state}" = 'pending'
          AND o."{scheduled_at}" <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
          AND (o."{key}" IS NULL OR o."{key}" = ''
               OR NOT EXISTS (
                    SELECT 1 FROM "{outbox}" p
                    WHERE p."{key}" = o."{key}"
                      AND p."{state}" IN ('pending', 'processing')
                      AND (p."{sequence}" < o."{sequence}" OR p."{state}" = 'processing')))
        ORDER BY o."{scheduled_at}", o."{sequence}"
        LIMIT :limit)
  AND "{state}" = 'pending'
RETURNING "{id}", "{claim_token}", "{topic}", NULLIF("{key}", ''), "{payload}", "{headers}",
          "{aggregate_type}", "{attempt}", "{max_attempts}", "{sequence}", "{scheduled_at}"
