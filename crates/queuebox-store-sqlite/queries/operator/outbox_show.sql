-- Locking: none, read only. Isolation: a read snapshot (WAL).
-- One outbox row shown whole (ADM-16, ADM-18), by its id; claim_token is never read (ADM-12).
SELECT o."{id}", o."{topic}", NULLIF(o."{key}", ''), o."{aggregate_type}", o."{state}",
       o."{attempt}", o."{max_attempts}", o."{scheduled_at}", o."{created_at}",
       o."{updated_at}", o."{last_error}", o."{sequence}", o."{claimed_at}",
       o."{lease_expires_at}", o."{headers}", o."{payload}"
FROM "{outbox}" o
WHERE o."{id}" = :id
