-- Locking: none, read only. Isolation: READ COMMITTED.
-- One outbox row shown whole (ADM-16, ADM-18), by its primary key; claim_token is never read
-- (ADM-12).
SELECT o."{id}" AS id, o."{topic}"::text AS topic, NULLIF(o."{key}", '')::text AS key,
       o."{aggregate_type}"::text AS aggregate_type, o."{state}"::text AS state,
       o."{attempt}" AS attempt, o."{max_attempts}" AS max_attempts,
       o."{scheduled_at}" AS scheduled_at, o."{created_at}" AS created_at,
       o."{updated_at}" AS updated_at, o."{last_error}" AS last_error,
       o."{sequence}" AS sequence, o."{claimed_at}" AS claimed_at,
       o."{lease_expires_at}" AS lease_expires_at, o."{headers}"::text AS headers,
       o."{payload}"::text AS payload
FROM "{outbox}" o
WHERE o."{id}" = :id
