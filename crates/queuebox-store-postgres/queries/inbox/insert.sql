-- Locking: the unique index on (source, idempotency_key) decides duplicates; a pair another transaction is inserting is waited for. Isolation: READ COMMITTED.
-- Store a batch (INB-49/50, INB-44, SCH-21, SCH-40). READ COMMITTED, one statement for the
-- whole batch. Locking: the unique index on (source, idempotency_key) decides duplicates: a
-- pair that exists, or that an earlier row of this batch inserted, is skipped by ON CONFLICT
-- DO NOTHING without changing the existing row; a pair being inserted by another transaction
-- is waited for. Only inserted rows come back, so an input id missing from the answer is a
-- duplicate. The rows are inserted in input order (ORDER BY ord), so within a batch the first
-- row of a pair wins. The clock is read once: created_at is the receipt time, and
-- scheduled_at = receipt + delay, or min(publish time, receipt) + delay when a publish time
-- is given (inbox.md §7).
-- :ids = ids, :sources = sources, :idempotency_keys = idempotency keys, :aggregate_ids = aggregate ids, :event_types = event types,
-- :payloads = payloads (JSON text), :headers = headers (JSON object text), :consumptions = consumption ('push' or
-- 'pull'), :correlation_ids = correlation ids, :publish_ms = publish times in ms since 1970 (NULL: none),
-- :delays_ms = delays in ms, :states = states ('pending', or 'dead' for a broker message that
-- cannot be used, INB-56/58), :last_errors = last errors (NULL for a pending row) (all arrays of
-- one length).
WITH clock AS MATERIALIZED (SELECT clock_timestamp() AS at)
INSERT INTO "{inbox}" ("{id}", "{source}", "{idempotency_key}", "{aggregate_id}", "{event_type}",
                     "{payload}", "{headers}", "{state}", "{consumption}", "{attempt}", "{scheduled_at}",
                     "{created_at}", "{processed_at}", "{claimed_at}", "{claim_token}",
                     "{lease_expires_at}", "{correlation_id}", "{last_error}")
SELECT r.id, r.source, r.idempotency_key, r.aggregate_id, r.event_type,
       r.payload::jsonb, r.headers::jsonb, r.state, r.consumption, 0,
       CASE WHEN r.publish_ms IS NULL THEN c.at
            ELSE LEAST(to_timestamp(r.publish_ms / 1000.0), c.at) END
           + r.delay_ms * INTERVAL '1 millisecond',
       c.at, NULL, NULL, NULL, NULL, r.correlation_id, r.last_error
FROM unnest(:ids::uuid[], :sources::text[], :idempotency_keys::text[], :aggregate_ids::text[], :event_types::text[], :payloads::text[],
            :headers::text[], :consumptions::text[], :correlation_ids::text[], :publish_ms::int8[], :delays_ms::int8[],
            :states::text[], :last_errors::text[])
         WITH ORDINALITY
         AS r(id, source, idempotency_key, aggregate_id, event_type, payload, headers,
              consumption, correlation_id, publish_ms, delay_ms, state, last_error, ord)
     CROSS JOIN clock c
ORDER BY r.ord
ON CONFLICT ("{source}", "{idempotency_key}") DO NOTHING
RETURNING "{id}"
