-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Delete one row (ADM-23) if it is processed or dead, guarded in the delete itself. Run after
-- inbox_state.sql in the same transaction.
-- :id = id.
DELETE FROM "{inbox}"
WHERE "{id}" = :id AND "{state}" IN ('processed', 'dead')
