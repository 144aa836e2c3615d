-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Replay one chunk (OUT-48..52, ADM-9, ADM-15): at most :chunk sent or dead rows, oldest
-- sequence first, back to pending with attempt 0 and scheduled_at = updated_at = now; id,
-- sequence and the message columns are kept. The UPDATE repeats the state condition.
-- Filters (ADM-13): a NULL parameter is no filter; a JSON array (ids, topics, sources) that is
-- empty matches nothing. Times are in the fixed text form, so text order is time order. The
-- error filter is instr(), a literal, case-sensitive substring: no LIKE wildcard applies.
UPDATE "{outbox}"
SET "{state}" = 'pending',
    "{attempt}" = 0,
    "{last_error}" = NULL,
    "{scheduled_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
    "{updated_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
    "{claimed_at}" = NULL,
    "{claim_token}" = NULL,
    "{lease_expires_at}" = NULL
WHERE "{sequence}" IN (
    SELECT o."{sequence}"
    FROM "{outbox}" o
    WHERE o."{state}" IN ('sent', 'dead')
      AND (:ids IS NULL OR o."{id}" IN (SELECT j.value FROM json_each(:ids) j))
      AND (:topics IS NULL OR o."{topic}" IN (SELECT j.value FROM json_each(:topics) j))
      AND (:key IS NULL OR o."{key}" = :key)
      AND (:created_after IS NULL OR o."{created_at}" > :created_after)
      AND (:created_before IS NULL OR o."{created_at}" < :created_before)
      AND (:error_contains IS NULL OR instr(o."{last_error}", :error_contains) > 0)
    ORDER BY o."{sequence}"
    LIMIT :chunk)
  AND "{state}" IN ('sent', 'dead')
