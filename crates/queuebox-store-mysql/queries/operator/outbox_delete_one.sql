-- Locking: the row lock of the one row. Isolation: READ COMMITTED.
-- Delete one outbox row (ADM-19), guarded in the DELETE: only sent or dead rows go. When it
-- deletes nothing, outbox_state_of.sql tells a missing row from one in another state.
DELETE FROM `{outbox}`
WHERE `{id}` = :id AND `{state}` IN ('sent', 'dead')
