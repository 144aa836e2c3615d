-- Locking: read under the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- The state of one row, read in the transaction of a single delete (ADM-23).
-- :id = id.
SELECT i."{state}" FROM "{inbox}" i WHERE i."{id}" = :id
