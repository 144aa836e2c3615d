-- Locking: none, read only. Isolation: READ COMMITTED.
-- One inbox row shown whole (ADM-22), by its primary key; claim_token is never read (ADM-12).
SELECT i.`{id}` AS id, i.`{source}` AS source,
       i.`{idempotency_key}` AS idempotency_key, i.`{aggregate_id}` AS aggregate_id,
       i.`{event_type}` AS event_type, i.`{consumption}` AS consumption,
       i.`{state}` AS state, i.`{attempt}` AS attempt,
       i.`{correlation_id}` AS correlation_id,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', i.`{scheduled_at}`) AS scheduled_at,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', i.`{created_at}`) AS created_at,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', i.`{processed_at}`) AS processed_at,
       i.`{last_error}` AS last_error,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', i.`{claimed_at}`) AS claimed_at,
       TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00.000000', i.`{lease_expires_at}`) AS lease_expires_at,
       i.`{headers}` AS headers, i.`{payload}` AS payload
FROM `{inbox}` i
WHERE i.`{id}` = :id
