-- Locking: none, read only. Isolation: READ COMMITTED.
-- The oldest-pending gauge (RLY-16, MET catalogue), a consistent read. Push and pull rows both
-- count; each minimum is the first entry of idx_inbox_push_pending or idx_inbox_pull_pending
-- (the pull index has source first, so that minimum reads the pending pull rows of every
-- source). When the oldest pending row is not due yet, the age is 0; with no pending row at
-- all, LEAST of two NULLs is NULL and the age is 0. UTC_TIMESTAMP(6) is one instant.
SELECT COALESCE(GREATEST(0, TIMESTAMPDIFF(MICROSECOND, LEAST(
           COALESCE((SELECT MIN(p.`{scheduled_at}`) FROM `{inbox}` p
                     WHERE p.`{consumption}` = 'push' AND p.`{state}` = 'pending'),
                    UTC_TIMESTAMP(6)),
           COALESCE((SELECT MIN(q.`{scheduled_at}`) FROM `{inbox}` q
                     WHERE q.`{consumption}` = 'pull' AND q.`{state}` = 'pending'),
                    UTC_TIMESTAMP(6))),
           UTC_TIMESTAMP(6))) / 1e6, 0e0) AS oldest_pending_age_seconds
