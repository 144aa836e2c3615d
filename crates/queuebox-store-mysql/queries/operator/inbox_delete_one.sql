-- Locking: the row lock of the one row. Isolation: READ COMMITTED.
-- Delete one inbox row (ADM-23), guarded in the DELETE: only processed or dead rows go; its
-- (source, idempotency_key) no longer deduplicates afterwards. When it deletes nothing,
-- inbox_state_of.sql tells a missing row from one in another state.
DELETE FROM `{inbox}`
WHERE `{id}` = :id AND `{state}` IN ('processed', 'dead')
