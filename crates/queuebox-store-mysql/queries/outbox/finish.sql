-- Locking: the row locks fence.sql took, in its transaction. Isolation: READ COMMITTED.
-- Terminal writes (OUT-28, OUT-31, OUT-41, SCH-15), after fence.sql, for the claims it
-- returned: one statement for the whole batch of mixed outcomes. The join condition is read
-- before any assignment, and no assignment reads a column another one changes.
-- Outcome codes: 0 = sent, 1 = retry (back to pending), 2 = dead. The CASE turns each into a
-- state literal (SCH-9); an unknown code yields NULL, which the NOT NULL column refuses.
-- Sent leaves attempt, scheduled_at and last_error alone; retry and dead write the given
-- attempt and error (cut to 2000 characters); only retry moves scheduled_at. A retry without
-- an error is a hold by the destination guard: it keeps last_error, the last real failure.
-- :writes = JSON array of {"id", "token", "outcome", "attempt", "delay_ms", "error"}.
-- Plan: the JSON array is read first (STRAIGHT_JOIN) and each of its rows finds its table row
-- through the unique index on id (FORCE INDEX), so the statement locks and waits for those
-- rows only, never for a row another transaction holds, however small the table.
UPDATE JSON_TABLE(:writes, '$[*]' COLUMNS (
         id       CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
         token    CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.token',
         outcome  INT PATH '$.outcome',
         attempt  INT PATH '$.attempt',
         delay_ms BIGINT PATH '$.delay_ms',
         error    LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.error')) w
STRAIGHT_JOIN `{outbox}` t FORCE INDEX (`{outbox_id_index}`)
  ON t.`{id}` = w.id AND t.`{claim_token}` = w.token
SET t.`{state}` = CASE w.outcome WHEN 0 THEN 'sent' WHEN 1 THEN 'pending' WHEN 2 THEN 'dead' END,
    t.`{attempt}` = CASE WHEN w.outcome = 0 THEN t.`{attempt}` ELSE w.attempt END,
    t.`{scheduled_at}` = CASE WHEN w.outcome = 1
                           THEN UTC_TIMESTAMP(6) + INTERVAL w.delay_ms * 1000 MICROSECOND
                           ELSE t.`{scheduled_at}` END,
    t.`{last_error}` = CASE WHEN w.outcome = 0 OR w.error IS NULL THEN t.`{last_error}` ELSE LEFT(w.error, 2000) END,
    t.`{claim_token}` = NULL,
    t.`{lease_expires_at}` = NULL,
    t.`{updated_at}` = UTC_TIMESTAMP(6)
WHERE t.`{state}` = 'processing'
