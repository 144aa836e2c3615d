-- Locking: the row locks inbox_requeue_select.sql took, in its transaction. Isolation: READ COMMITTED.
-- Requeue, one chunk, second statement: the locked dead rows back to pending, attempt 0,
-- scheduled_at now, no error, processed time, claim or lease. id, source, idempotency_key,
-- consumption, payload and headers stay; a push row is forwarded again, a pull row claimed
-- again (RLY-18). The UPDATE repeats the state guard.
-- :ids = JSON array of the ids the read returned.
-- Plan: the JSON array is read first (STRAIGHT_JOIN) and each of its rows finds its table row
-- through the unique index on id (FORCE INDEX), so the statement locks and waits for those
-- rows only, never for a row another transaction holds, however small the table.
UPDATE JSON_TABLE(:ids, '$[*]' COLUMNS (id CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$')) j
STRAIGHT_JOIN `{inbox}` t FORCE INDEX (`{inbox_id_index}`)
  ON t.`{id}` = j.id
SET t.`{state}` = 'pending',
    t.`{attempt}` = 0,
    t.`{last_error}` = NULL,
    t.`{scheduled_at}` = UTC_TIMESTAMP(6),
    t.`{processed_at}` = NULL,
    t.`{claimed_at}` = NULL,
    t.`{claim_token}` = NULL,
    t.`{lease_expires_at}` = NULL
WHERE t.`{state}` = 'dead'
