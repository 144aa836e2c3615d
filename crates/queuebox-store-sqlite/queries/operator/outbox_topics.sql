-- Locking: none, read only. Isolation: a read snapshot (WAL).
-- Every distinct topic of the outbox, for resolving a destination filter (ADM-13).
SELECT DISTINCT o."{topic}"
FROM "{outbox}" o
ORDER BY 1
