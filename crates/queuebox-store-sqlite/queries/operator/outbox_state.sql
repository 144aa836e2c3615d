-- Locking: read under the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- The state of one row, read in the transaction of a single delete (ADM-19).
-- :id = id.
SELECT o."{state}" FROM "{outbox}" o WHERE o."{id}" = :id
