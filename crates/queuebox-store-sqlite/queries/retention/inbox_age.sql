-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Inbox retention by age (RET-2..4, RET-6, RET-8, RET-11): one DELETE of at most :batch rows,
-- oldest created_at first (idx_inbox_state_created). Never pending or processing rows, push
-- or pull.
-- :max_age_ms = maximum age in ms, :batch = batch size.
DELETE FROM "{inbox}"
WHERE "{id}" IN (
        SELECT d."{id}"
        FROM "{inbox}" d
        WHERE d."{state}" IN ('processed', 'dead')
          AND d."{created_at}" < strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', -:max_age_ms / 1000.0))
        ORDER BY d."{created_at}"
        LIMIT :batch)
