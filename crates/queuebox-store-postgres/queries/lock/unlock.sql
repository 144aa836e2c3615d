-- Locking: releases the session-level advisory lock. Isolation: none (no row is read).
-- Releases the session advisory lock taken by lock/try_lock.sql on this same connection.
SELECT pg_advisory_unlock(8175552253447532408)
