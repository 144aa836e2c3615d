-- Locking: candidate rows FOR UPDATE SKIP LOCKED, in the claim transaction. Isolation: READ COMMITTED.
-- Claim, first statement (OUT-11..17): the candidates and every column the claim returns. It
-- runs in the claim transaction; claim_update.sql follows, and COMMIT ends it. MySQL has no
-- UPDATE ... RETURNING and no LIMIT in an IN subquery, so the claim is this locking read and
-- one UPDATE of the ids it returned (outbox.md OUT-17), instead of one statement.
-- Locking: the candidate rows are taken FOR UPDATE SKIP LOCKED, so concurrent claimers never
-- wait on each other and never take the same row; the locks last until COMMIT, so the values
-- read here are the ones the UPDATE sees. The head-of-key tests (NOT EXISTS) have no locking
-- clause, so they are plain consistent reads of the committed rows (MySQL 8 and MariaDB both
-- read a subquery without a locking clause that way): they skip nothing. "No lower pending or
-- processing row" is a range on idx_outbox_key_sequence (key, state, sequence); "no
-- processing row of the key" (which may have a higher sequence, OUT-13 rule 3) is a lookup in
-- the same index. So only the lowest-sequence row of a key with nothing in processing can be a
-- candidate, and one claim takes at most one row per key. `key` = '' is no key (outbox.md §1).
-- :limit = rows requested.
SELECT o.`{id}` AS id, o.`{topic}` AS topic, NULLIF(o.`{key}`, '') AS k,
       o.`{payload}` AS payload, o.`{headers}` AS headers,
       o.`{aggregate_type}` AS aggregate_type, o.`{attempt}` AS attempt,
       o.`{max_attempts}` AS max_attempts, o.`{sequence}` AS sequence
FROM `{outbox}` o
WHERE o.`{state}` = 'pending'
  AND o.`{scheduled_at}` <= UTC_TIMESTAMP(6)
  AND (o.`{key}` IS NULL OR o.`{key}` = ''
       OR (NOT EXISTS (
                SELECT 1 FROM `{outbox}` p
                WHERE p.`{key}` = o.`{key}`
                  AND p.`{state}` IN ('pending', 'processing')
                  AND p.`{sequence}` < o.`{sequence}`)
           AND NOT EXISTS (
                SELECT 1 FROM `{outbox}` b
                WHERE b.`{key}` = o.`{key}`
                  AND b.`{state}` = 'processing')))
ORDER BY o.`{scheduled_at}`, o.`{sequence}`
LIMIT :limit
FOR UPDATE SKIP LOCKED
