-- Locking: the row lock of the one row. Isolation: READ COMMITTED.
-- Delete one inbox row (ADM-23), guarded in the DELETE: only processed or dead rows go; its
-- (source, idempotency_key) no longer deduplicates afterwards. The state read beside it (same
-- snapshot) tells a missing row (NULL) from one in another state.
WITH target AS MATERIALIZED (
    SELECT i."{state}"::text AS state FROM "{inbox}" i WHERE i."{id}" = :id
),
deleted AS (
    DELETE FROM "{inbox}" d
    WHERE d."{id}" = :id AND d."{state}" IN ('processed', 'dead')
    RETURNING 1
)
SELECT (SELECT count(*) FROM deleted) AS deleted, (SELECT state FROM target) AS state
