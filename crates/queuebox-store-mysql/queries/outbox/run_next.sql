-- Locking: FOR UPDATE on the rows it reads, in the run claim transaction, never SKIP LOCKED. Isolation: READ COMMITTED.
-- Run claim, second statement, once per run (OUT-13a): the next :limit pending rows of the
-- key after the row the run follows, in sequence order, one range of idx_outbox_key_sequence
-- (key, state, sequence), so its cost does not grow with the backlog of the key. `due` tells
-- whether each is due; the store keeps the rows before the first that is not, so a run never
-- skips a row. No other claimer can take these rows: the run's row, locked by run_fence.sql,
-- keeps them from being the head of their key. claim_update.sql then claims the kept rows.
-- :key = the key, :seq = the sequence of the row the run follows, :limit = rows to read.
SELECT o.`{id}` AS id, o.`{topic}` AS topic, NULLIF(o.`{key}`, '') AS k,
       o.`{payload}` AS payload, o.`{headers}` AS headers,
       o.`{aggregate_type}` AS aggregate_type, o.`{attempt}` AS attempt,
       o.`{max_attempts}` AS max_attempts, o.`{sequence}` AS sequence,
       (o.`{scheduled_at}` <= UTC_TIMESTAMP(6)) AS due
FROM `{outbox}` o
WHERE o.`{key}` = :key
  AND o.`{state}` = 'pending'
  AND o.`{sequence}` > :seq
ORDER BY o.`{sequence}`
LIMIT :limit
FOR UPDATE
