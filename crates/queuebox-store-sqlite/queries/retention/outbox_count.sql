-- Locking: the database write lock (BEGIN IMMEDIATE). Isolation: serializable.
-- Outbox retention by count (RET-2, RET-3, RET-5, RET-6, RET-8): one DELETE of at most :batch
-- rows. The newest :keep sent rows and, separately, the newest :keep dead rows are kept, newest
-- by (updated_at, id): each edge is the newest row of its state beyond them, read from
-- idx_outbox_state_updated with OFFSET; rows at or below the edge of their state go, oldest
-- updated_at first. A state with at most :keep rows has no edge (NULL), and the row comparison
-- then matches nothing.
-- :keep = rows to keep per state, :batch = batch size.
DELETE FROM "{outbox}"
WHERE "{sequence}" IN (
        SELECT d."{sequence}"
        FROM "{outbox}" d
        WHERE (d."{state}" = 'sent'
               AND (d."{updated_at}", d."{id}") <= (
                    SELECT e."{updated_at}", e."{id}" FROM "{outbox}" e
                    WHERE e."{state}" = 'sent'
                    ORDER BY e."{updated_at}" DESC, e."{id}" DESC
                    LIMIT 1 OFFSET :keep))
           OR (d."{state}" = 'dead'
               AND (d."{updated_at}", d."{id}") <= (
                    SELECT e."{updated_at}", e."{id}" FROM "{outbox}" e
                    WHERE e."{state}" = 'dead'
                    ORDER BY e."{updated_at}" DESC, e."{id}" DESC
                    LIMIT 1 OFFSET :keep))
        ORDER BY d."{updated_at}"
        LIMIT :batch)
