-- Locking: the row locks fence.sql took, in its transaction. Isolation: READ COMMITTED.
-- Relay release (RLY-12 with an error, RLY-15 without), after fence.sql, for the claims it
-- returned. attempt and scheduled_at stay, so the row keeps its place in its aggregate;
-- last_error is written (cut to 2000 characters) only when an error is given.
-- :claims = JSON array of {"id", "token"}, :error = error text or NULL.
-- Plan: the JSON array is read first (STRAIGHT_JOIN) and each of its rows finds its table row
-- through the unique index on id (FORCE INDEX), so the statement locks and waits for those
-- rows only, never for a row another transaction holds, however small the table.
UPDATE JSON_TABLE(:claims, '$[*]' COLUMNS (
         id    CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
         token CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.token')) c
STRAIGHT_JOIN `{inbox}` t FORCE INDEX (`{inbox_id_index}`)
  ON t.`{id}` = c.id AND t.`{claim_token}` = c.token
SET t.`{state}` = 'pending',
    t.`{claim_token}` = NULL,
    t.`{lease_expires_at}` = NULL,
    t.`{last_error}` = CASE WHEN :error IS NULL THEN t.`{last_error}` ELSE LEFT(:error, 2000) END
WHERE t.`{state}` = 'processing' AND t.`{consumption}` = 'push'
