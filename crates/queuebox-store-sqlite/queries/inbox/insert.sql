-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Store a batch (INB-49/50, INB-44, SCH-21, SCH-40), one statement for the whole batch, the
-- rows as one JSON array of objects. The unique constraint on (source, idempotency_key)
-- decides duplicates: a pair that exists, or that an earlier row of this batch inserted, is
-- skipped by ON CONFLICT DO NOTHING without changing the existing row. Only inserted rows come
-- back, so an input id missing from the answer is a duplicate. Rows go in input order (ORDER BY
-- the array index), so within a batch the first row of a pair wins. 'now' is one instant for
-- the statement: created_at is the receipt time, and scheduled_at = receipt + delay, or
-- min(publish time, receipt) + delay when a publish time is given (inbox.md §7). Text order is
-- time order in the fixed form, so min() of two texts is the earlier time. `WHERE true` keeps
-- SQLite from reading ON CONFLICT as a join constraint.
-- :rows = JSON array of {"id", "source", "idempotency_key", "aggregate_id", "event_type",
-- "payload", "headers", "consumption", "correlation_id", "publish_ms", "delay_ms", "state",
-- "last_error"}; payload and headers are JSON texts inside JSON strings.
INSERT INTO "{inbox}" ("{id}", "{source}", "{idempotency_key}", "{aggregate_id}", "{event_type}",
                     "{payload}", "{headers}", "{state}", "{consumption}", "{attempt}", "{scheduled_at}",
                     "{created_at}", "{processed_at}", "{claimed_at}", "{claim_token}",
                     "{lease_expires_at}", "{correlation_id}", "{last_error}")
SELECT r.value ->> '$.id', r.value ->> '$.source', r.value ->> '$.idempotency_key',
       r.value ->> '$.aggregate_id', r.value ->> '$.event_type',
       r.value ->> '$.payload', r.value ->> '$.headers', r.value ->> '$.state',
       r.value ->> '$.consumption', 0,
       strftime('%Y-%m-%dT%H:%M:%fZ',
                CASE WHEN r.value ->> '$.publish_ms' IS NULL
                     THEN strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                     ELSE min(strftime('%Y-%m-%dT%H:%M:%fZ', (r.value ->> '$.publish_ms') / 1000.0, 'unixepoch'),
                              strftime('%Y-%m-%dT%H:%M:%fZ', 'now')) END,
                printf('%+.3f seconds', (r.value ->> '$.delay_ms') / 1000.0)),
       strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), NULL, NULL, NULL, NULL,
       r.value ->> '$.correlation_id', r.value ->> '$.last_error'
FROM json_each(:rows) r
WHERE true
ORDER BY r.key
ON CONFLICT ("{source}", "{idempotency_key}") DO NOTHING
RETURNING "{id}"
