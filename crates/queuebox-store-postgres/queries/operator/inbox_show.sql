-- Locking: none, read only. Isolation: READ COMMITTED.
-- One inbox row shown whole (ADM-22), by its primary key; claim_token is never read (ADM-12).
SELECT i."{id}" AS id, i."{source}"::text AS source,
       i."{idempotency_key}"::text AS idempotency_key, i."{aggregate_id}"::text AS aggregate_id,
       i."{event_type}"::text AS event_type, i."{consumption}"::text AS consumption,
       i."{state}"::text AS state, i."{attempt}" AS attempt,
       i."{correlation_id}"::text AS correlation_id, i."{scheduled_at}" AS scheduled_at,
       i."{created_at}" AS created_at, i."{processed_at}" AS processed_at,
       i."{last_error}" AS last_error,
       i."{claimed_at}" AS claimed_at, i."{lease_expires_at}" AS lease_expires_at,
       i."{headers}"::text AS headers, i."{payload}"::text AS payload
FROM "{inbox}" i
WHERE i."{id}" = :id
