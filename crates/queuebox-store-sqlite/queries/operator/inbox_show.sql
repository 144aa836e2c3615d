-- Locking: none, read only. Isolation: a read snapshot (WAL).
-- One inbox row shown whole (ADM-22), by its id; claim_token is never read.
SELECT i."{id}", i."{source}", i."{idempotency_key}", i."{aggregate_id}", i."{event_type}",
       i."{consumption}", i."{state}", i."{attempt}", i."{correlation_id}",
       i."{scheduled_at}", i."{created_at}", i."{processed_at}", i."{last_error}",
       i."{claimed_at}", i."{lease_expires_at}", i."{headers}", i."{payload}"
FROM "{inbox}" i
WHERE i."{id}" = :id
