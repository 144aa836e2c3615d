-- Locking: none beyond the new outbox row, inside the forward transaction. Isolation: READ COMMITTED.
-- Forward, first statement (RLY-9 step 2, RLY-10, SCH-40): the outbox row, inside the forward
-- transaction; forward_mark.sql follows, and the transaction rolls back when the mark finds no
-- row. Every column but sequence is named; the clock is read once, so scheduled_at,
-- created_at and updated_at are equal. Locking: none beyond the new row.
-- :id = id, :topic = topic, :key = key (the inbox aggregate id, or NULL), :payload = payload (JSON text),
-- :headers = headers (JSON object text), :max_attempts = max attempts.
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS at)
INSERT INTO "{outbox}" ("{id}", "{topic}", "{key}", "{payload}",
                      "{headers}", "{aggregate_type}", "{state}",
                      "{attempt}", "{max_attempts}", "{scheduled_at}",
                      "{created_at}", "{updated_at}", "{claimed_at}",
                      "{claim_token}", "{lease_expires_at}", "{last_error}")
SELECT :id::uuid, :topic::text, :key::text, :payload::text::jsonb, :headers::text::jsonb, NULL, 'pending', 0,
       :max_attempts::int4, c.at, c.at, c.at, NULL, NULL, NULL, NULL
FROM clock c
