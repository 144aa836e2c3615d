-- Readiness round trip; no locks.
SELECT 1
