-- Locking: the unique index uq_inbox_source_idempotency decides duplicates; a pair another transaction is inserting is waited for. Isolation: READ COMMITTED.
-- Store a batch (INB-49/50, INB-44, SCH-21, SCH-40): one statement for the whole batch, the
-- rows travelling as one JSON array. Locking: the unique index on (source, idempotency_key)
-- decides duplicates: a pair that exists, or that an earlier row of this batch inserted, meets
-- ON DUPLICATE KEY UPDATE, which assigns the existing row's id to itself and so changes
-- nothing; a pair being inserted by another transaction is waited for (a deadlock between two
-- such batches is transient and the intake retries it). The rows are inserted in input order
-- (ORDER BY ord), so within a batch the first row of a pair wins. MySQL has no RETURNING:
-- stored.sql reads back which of the batch's ids exist. The clock is read once per statement:
-- created_at is the receipt time, and scheduled_at = receipt + delay, or min(publish time,
-- receipt) + delay when a publish time is given (inbox.md §7).
-- :rows = JSON array of {"id", "source", "idempotency_key", "aggregate_id", "event_type",
-- "payload" (JSON text), "headers" (JSON object text), "consumption", "correlation_id",
-- "publish_ms" (ms since 1970 or null), "delay_ms", "state" ('pending', or 'dead' for a broker
-- message that cannot be used, INB-56/58), "last_error"}.
INSERT INTO `{inbox}` (`{id}`, `{source}`, `{idempotency_key}`, `{aggregate_id}`,
                     `{event_type}`, `{payload}`, `{headers}`, `{state}`, `{consumption}`,
                     `{attempt}`, `{scheduled_at}`, `{created_at}`, `{processed_at}`,
                     `{claimed_at}`, `{claim_token}`, `{lease_expires_at}`,
                     `{correlation_id}`, `{last_error}`)
SELECT r.id, r.source, r.idempotency_key, r.aggregate_id, r.event_type, r.payload, r.headers,
       r.state, r.consumption, 0,
       CASE WHEN r.publish_ms IS NULL THEN k.at
            ELSE LEAST(TIMESTAMPADD(MICROSECOND, r.publish_ms * 1000, '1970-01-01 00:00:00.000000'),
                       k.at) END
           + INTERVAL r.delay_ms * 1000 MICROSECOND,
       k.at, NULL, NULL, NULL, NULL, r.correlation_id, r.last_error
FROM JSON_TABLE(:rows, '$[*]' COLUMNS (
         ord             FOR ORDINALITY,
         id              CHAR(36) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.id',
         source          VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.source',
         idempotency_key VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.idempotency_key',
         aggregate_id    VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.aggregate_id',
         event_type      VARCHAR(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.event_type',
         payload         LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.payload',
         headers         LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.headers',
         consumption     VARCHAR(4) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.consumption',
         correlation_id  VARCHAR(128) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.correlation_id',
         publish_ms      BIGINT PATH '$.publish_ms',
         delay_ms        BIGINT PATH '$.delay_ms',
         state           VARCHAR(50) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.state',
         last_error      LONGTEXT CHARACTER SET utf8mb4 COLLATE utf8mb4_bin PATH '$.last_error')) r
CROSS JOIN (SELECT UTC_TIMESTAMP(6) AS at) k
ORDER BY r.ord
ON DUPLICATE KEY UPDATE `{inbox}`.`{id}` = `{inbox}`.`{id}`
