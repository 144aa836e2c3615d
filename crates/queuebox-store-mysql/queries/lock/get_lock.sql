-- Locking: the named session lock queuebox_migrate (SCH-47). Isolation: none.
-- The migration lock: a named lock of the session, waited for up to :seconds (fractions
-- allowed). 1: taken; 0: another session kept it for the whole wait; NULL: an error. It goes
-- away with the session, so a QueueBox that dies while migrating never leaves it behind.
SELECT GET_LOCK('queuebox_migrate', :seconds)
