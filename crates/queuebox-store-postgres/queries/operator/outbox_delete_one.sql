-- Locking: the row lock of the one row. Isolation: READ COMMITTED.
-- Delete one outbox row (ADM-19), guarded in the DELETE: only sent or dead rows go. The state
-- read beside it (same snapshot) tells a missing row (NULL) from one in another state.
WITH target AS MATERIALIZED (
    SELECT o."{state}"::text AS state FROM "{outbox}" o WHERE o."{id}" = :id
),
deleted AS (
    DELETE FROM "{outbox}" d
    WHERE d."{id}" = :id AND d."{state}" IN ('sent', 'dead')
    RETURNING 1
)
SELECT (SELECT count(*) FROM deleted) AS deleted, (SELECT state FROM target) AS state
