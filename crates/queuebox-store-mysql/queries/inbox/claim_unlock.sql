-- Locking: releases the named session lock of the relay claim. Isolation: none.
-- :name = the lock name.
SELECT RELEASE_LOCK(:name)
