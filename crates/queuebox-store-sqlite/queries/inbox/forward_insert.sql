-- Locking: the database write lock (BEGIN IMMEDIATE), in the forward transaction. Isolation: serializable.
-- Forward, second statement (RLY-9 step 2, RLY-10, SCH-40): the outbox row, in the same
-- transaction as forward_mark.sql. Every column but sequence is named; 'now' is one instant for
-- the statement, so scheduled_at, created_at and updated_at are equal.
-- :id = id, :topic = topic, :key = key (the inbox aggregate id, or NULL), :payload = payload
-- (JSON text), :headers = headers (JSON object text), :max_attempts = max attempts.
INSERT INTO "{outbox}" ("{id}", "{topic}", "{key}", "{payload}",
                      "{headers}", "{aggregate_type}", "{state}",
                      "{attempt}", "{max_attempts}", "{scheduled_at}",
                      "{created_at}", "{updated_at}", "{claimed_at}",
                      "{claim_token}", "{lease_expires_at}", "{last_error}")
VALUES (:id, :topic, :key, :payload, :headers, NULL, 'pending', 0, :max_attempts,
        strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
        strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), NULL, NULL, NULL, NULL)
