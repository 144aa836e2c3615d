-- Locking: none, read only. Isolation: READ COMMITTED.
-- Every distinct topic of the outbox, for resolving a destination filter (ADM-13). Reads the
-- table once (no index holds topic); QueueBox sorts them by bytes.
SELECT DISTINCT o.`{topic}` AS topic
FROM `{outbox}` o
