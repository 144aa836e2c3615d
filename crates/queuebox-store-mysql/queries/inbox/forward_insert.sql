-- Locking: none beyond the new outbox row, inside the forward transaction. Isolation: READ COMMITTED.
-- Forward, first statement (RLY-9 step 2, RLY-10, SCH-40): the outbox row, inside the forward
-- transaction; forward_mark.sql follows, and the transaction rolls back when the mark finds no
-- row. Every column but sequence is named; UTC_TIMESTAMP(6) is one instant for the statement,
-- so scheduled_at, created_at and updated_at are equal.
-- :id = id, :topic = topic, :key = key (the inbox aggregate id, or NULL), :payload = payload
-- (JSON text), :headers = headers (JSON object text), :max_attempts = max attempts.
INSERT INTO `{outbox}` (`{id}`, `{topic}`, `{key}`, `{payload}`, `{headers}`,
                      `{aggregate_type}`, `{state}`, `{attempt}`, `{max_attempts}`,
                      `{scheduled_at}`, `{created_at}`, `{updated_at}`, `{claimed_at}`,
                      `{claim_token}`, `{lease_expires_at}`, `{last_error}`)
VALUES (:id, :topic, :key, :payload, :headers, NULL, 'pending', 0, :max_attempts,
        UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), NULL, NULL, NULL, NULL)
