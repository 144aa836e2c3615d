-- Locking: none itself; lifts the session's lock_timeout for this transaction. Isolation: the migration's.
-- First statement of a migration's transaction: its DDL waits for table locks without a limit,
-- as before; the session's lock_timeout (connect.rs SESSION_OPTIONS) is for the delivery path.
SET LOCAL lock_timeout = 0
