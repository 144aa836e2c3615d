-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Outbox retention by age (RET-2..4, RET-6, RET-8): one DELETE of at most :batch rows, oldest
-- updated_at first (idx_outbox_state_updated). Never pending or processing rows; the single
-- writer means two runs never delete the same row.
-- :max_age_ms = maximum age in ms, :batch = batch size.
DELETE FROM "{outbox}"
WHERE "{sequence}" IN (
        SELECT d."{sequence}"
        FROM "{outbox}" d
        WHERE d."{state}" IN ('sent', 'dead')
          AND d."{updated_at}" < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', -:max_age_ms / 1000.0))
        ORDER BY d."{updated_at}"
        LIMIT :batch)
