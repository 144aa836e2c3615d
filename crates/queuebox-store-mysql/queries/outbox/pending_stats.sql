-- Locking: none, read only. Isolation: READ COMMITTED.
-- Pending gauges (MET catalogue). A consistent read, no row locks. state = 'pending' is a
-- literal, so idx_outbox_pending (state, scheduled_at, sequence) serves it (SCH-9, SCH-14).
-- UTC_TIMESTAMP(6) is one instant for the statement, so the due test and the age agree.
-- Always one row (count 0, age 0 when nothing is due).
SELECT COUNT(*) AS pending,
       COALESCE(GREATEST(0, TIMESTAMPDIFF(MICROSECOND,
           MIN(CASE WHEN o.`{scheduled_at}` <= UTC_TIMESTAMP(6) THEN o.`{scheduled_at}` END),
           UTC_TIMESTAMP(6))) / 1e6, 0e0) AS oldest_due_age_seconds
FROM `{outbox}` o
WHERE o.`{state}` = 'pending'
