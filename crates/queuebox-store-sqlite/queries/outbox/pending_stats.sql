-- Locking: none, read only. Isolation: a read snapshot (WAL).
-- Pending gauges (MET catalogue). state = 'pending' is a literal so the partial index
-- idx_outbox_pending serves it (SCH-9). 'now' is one instant for the statement, so the due
-- test and the ages agree. Always one row (count 0, ages 0 when nothing is pending). The age by
-- created_at reads the same pending rows (one pass, O(pending), like the count); the dead count
-- is a range of idx_outbox_state_updated.
SELECT count(*),
       COALESCE(max(0.0, (julianday('now') - julianday(min(
           CASE WHEN o."{scheduled_at}" <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                THEN o."{scheduled_at}" END))) * 86400.0), 0.0),
       COALESCE(max(0.0, (julianday('now') - julianday(min(o."{created_at}"))) * 86400.0), 0.0),
       (SELECT count(*) FROM "{outbox}" d WHERE d."{state}" = 'dead')
FROM "{outbox}" o
WHERE o."{state}" = 'pending'
