-- Locking: none. Isolation: none (no row is read).
-- Readiness round trip; no locks.
SELECT 1
