-- Locking: none. Isolation: none (no row is read).
-- Readiness round trip.
SELECT 1
