-- Locking: the row locks outbox_replay_select.sql took, in its transaction. Isolation: READ COMMITTED.
-- Replay, one chunk, second statement: the locked rows back to pending with attempt 0,
-- scheduled_at and updated_at now, and no error, claim or lease; id, sequence and the message
-- columns kept. The UPDATE repeats the state guard.
-- :ids = JSON array of the ids the read returned.
-- Plan: the JSON array is read first (STRAIGHT_JOIN) and each of its rows finds its table row
-- through the unique index on id (FORCE INDEX), so the statement locks and waits for those
-- rows only, never for a row another transaction holds, however small the table.
UPDATE JSON_TABLE(:ids, '$[*]' COLUMNS (id CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) j
STRAIGHT_JOIN `{outbox}` t FORCE INDEX (`{outbox_id_index}`)
  ON t.`{id}` = j.id
SET t.`{state}` = 'pending',
    t.`{attempt}` = 0,
    t.`{last_error}` = NULL,
    t.`{scheduled_at}` = UTC_TIMESTAMP(6),
    t.`{updated_at}` = UTC_TIMESTAMP(6),
    t.`{claimed_at}` = NULL,
    t.`{claim_token}` = NULL,
    t.`{lease_expires_at}` = NULL
WHERE t.`{state}` IN ('sent', 'dead')
