-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Delete one row (ADM-19) if it is sent or dead, guarded in the delete itself. Run after
-- outbox_state.sql in the same transaction, which tells a missing row from one not deletable.
-- :id = id.
DELETE FROM "{outbox}"
WHERE "{id}" = :id AND "{state}" IN ('sent', 'dead')
