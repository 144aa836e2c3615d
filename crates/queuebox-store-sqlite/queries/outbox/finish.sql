-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Terminal writes (OUT-28, OUT-31, OUT-41, SCH-15), one statement for the whole batch of mixed
-- outcomes, given as one JSON array of {"id", "token", "outcome", "attempt", "delay_ms",
-- "error"} objects. Fence: id + claim token + state = 'processing' + lease not yet expired.
-- Outcome codes: 0 = sent, 1 = retry (back to pending), 2 = dead. The CASE turns each into a
-- state literal (SCH-9); an unknown code yields NULL, which the NOT NULL column refuses.
-- Sent leaves attempt, scheduled_at and last_error alone; retry and dead write the given
-- attempt and error (cut to 2000 characters); only retry moves scheduled_at. A retry without
-- an error is a hold by the destination guard: it keeps last_error, the last real failure.
-- :writes = JSON array of writes.
UPDATE "{outbox}" AS t
SET "{state}" = CASE w.outcome WHEN 0 THEN 'sent' WHEN 1 THEN 'pending' WHEN 2 THEN 'dead' END,
    "{attempt}" = CASE WHEN w.outcome = 0 THEN t."{attempt}" ELSE w.attempt END,
    "{scheduled_at}" = CASE WHEN w.outcome = 1
                         THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', w.delay_ms / 1000.0))
                         ELSE t."{scheduled_at}" END,
    "{last_error}" = CASE WHEN w.outcome = 0 OR w.error IS NULL THEN t."{last_error}" ELSE substr(w.error, 1, 2000) END,
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL,
    "{updated_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
FROM (SELECT v.value ->> '$.id' AS id, v.value ->> '$.token' AS token,
             v.value ->> '$.outcome' AS outcome, v.value ->> '$.attempt' AS attempt,
             v.value ->> '$.delay_ms' AS delay_ms, v.value ->> '$.error' AS error
      FROM json_each(:writes) v) AS w
WHERE t."{id}" = w.id
  AND t."{claim_token}" = w.token
  AND t."{state}" = 'processing'
  AND t."{lease_expires_at}" > strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
RETURNING "{id}"
