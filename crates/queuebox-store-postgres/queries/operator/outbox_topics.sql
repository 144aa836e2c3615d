-- Locking: none, read only. Isolation: READ COMMITTED.
-- Every distinct topic of the outbox, for resolving a destination filter (ADM-13). Reads the
-- table once (no index holds topic).
SELECT DISTINCT o."{topic}"::text AS topic
FROM "{outbox}" o
ORDER BY 1
