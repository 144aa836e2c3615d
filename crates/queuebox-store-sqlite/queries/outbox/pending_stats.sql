-- Locking: none, read only. Isolation: a read snapshot (WAL).
-- Pending gauges (MET catalogue). state = 'pending' is a literal so the partial index
-- idx_outbox_pending serves it (SCH-9). 'now' is one instant for the statement, so the due
-- test and the age agree. Always one row (count 0, age 0 when nothing is due).
SELECT count(*),
       COALESCE(max(0.0, (julianday('now') - julianday(min(
           CASE WHEN o."{scheduled_at}" <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                THEN o."{scheduled_at}" END))) * 86400.0), 0.0)
FROM "{outbox}" o
WHERE o."{state}" = 'pending'
