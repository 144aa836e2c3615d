-- Forward, first statement (RLY-9 step 2, RLY-10, SCH-40): the outbox row, inside the forward
-- transaction; forward_mark.sql follows, and the transaction rolls back when the mark finds no
-- row. Every column but sequence is named; the clock is read once, so scheduled_at,
-- created_at and updated_at are equal. Locking: none beyond the new row.
-- $1 = id, $2 = topic, $3 = key (the inbox aggregate id, or NULL), $4 = payload (JSON text),
-- $5 = headers (JSON object text), $6 = max attempts.
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS at)
INSERT INTO {outbox} ({outbox.id}, {outbox.topic}, {outbox.key}, {outbox.payload},
                      {outbox.headers}, {outbox.aggregate_type}, {outbox.state},
                      {outbox.attempt}, {outbox.max_attempts}, {outbox.scheduled_at},
                      {outbox.created_at}, {outbox.updated_at}, {outbox.claimed_at},
                      {outbox.claim_token}, {outbox.lease_expires_at}, {outbox.last_error})
SELECT $1::uuid, $2::text, $3::text, $4::text::jsonb, $5::text::jsonb, NULL, 'pending', 0,
       $6::int4, c.at, c.at, c.at, NULL, NULL, NULL, NULL
FROM clock c
