-- Locking: none, read only. Isolation: READ COMMITTED.
-- One outbox row shown whole (ADM-16, ADM-18), by its unique id; claim_token is never read
-- (ADM-12).
SELECT o.`{id}` AS id, o.`{topic}` AS topic, NULLIF(o.`{key}`, '') AS k,
       o.`{aggregate_type}` AS aggregate_type, o.`{state}` AS state,
       o.`{attempt}` AS attempt, o.`{max_attempts}` AS max_attempts,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', o.`{scheduled_at}`) AS scheduled_at,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', o.`{created_at}`) AS created_at,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', o.`{updated_at}`) AS updated_at, o.`{last_error}` AS last_error,
       o.`{sequence}` AS sequence, TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', o.`{claimed_at}`) AS claimed_at,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', o.`{lease_expires_at}`) AS lease_expires_at,
       o.`{headers}` AS headers, o.`{payload}` AS payload
FROM `{outbox}` o
WHERE o.`{id}` = :id
