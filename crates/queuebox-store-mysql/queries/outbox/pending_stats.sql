-- Locking: none, read only. Isolation: READ COMMITTED.
-- Pending gauges (MET catalogue). A consistent read, no row locks. state = 'pending' is a
-- literal, so idx_outbox_pending (state, scheduled_at, sequence) serves it (SCH-9, SCH-14).
-- UTC_TIMESTAMP(6) is one instant for the statement, so the due test and the ages agree.
-- Always one row (count 0, ages 0 when nothing is pending). The age by created_at reads the
-- same pending rows (one pass, O(pending), like the count); the dead count is a range of
-- idx_outbox_state_updated (state, updated_at).
SELECT COUNT(*) AS pending,
       COALESCE(GREATEST(0, TIMESTAMPDIFF(MICROSECOND,
           MIN(CASE WHEN o.`{scheduled_at}` <= UTC_TIMESTAMP(6) THEN o.`{scheduled_at}` END),
           UTC_TIMESTAMP(6))) / 1e6, 0e0) AS oldest_due_age_seconds,
       COALESCE(GREATEST(0, TIMESTAMPDIFF(MICROSECOND, MIN(o.`{created_at}`),
           UTC_TIMESTAMP(6))) / 1e6, 0e0) AS oldest_created_age_seconds,
       (SELECT COUNT(*) FROM `{outbox}` d WHERE d.`{state}` = 'dead') AS dead
FROM `{outbox}` o
WHERE o.`{state}` = 'pending'
