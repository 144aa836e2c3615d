-- Locking: the named session lock of the relay claim (RLY-6), 10 s wait. Isolation: none.
-- The relay's claim lock: GET_LOCK before the claim transaction starts, RELEASE_LOCK
-- (claim_unlock.sql) after it ends, so relay claims of one inbox table never overlap and each
-- claim's busy test sees every committed claim. The name is queuebox_inbox_claim_<table>, or
-- queuebox_inbox_claim_ + the first 40 hex digits of SHA-256 of the table name when that is
-- over 64 characters (inbox.md RLY-6). 1: taken; 0: timeout; NULL: an error.
-- :name = the lock name.
SELECT GET_LOCK(:name, 10)
