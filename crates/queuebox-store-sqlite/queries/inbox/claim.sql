-- Locking: the database write lock (BEGIN IMMEDIATE), the relay's claim lock (RLY-6). Isolation: serializable.
-- Relay claim (RLY-2..5, INB-3), one UPDATE ... RETURNING inside BEGIN IMMEDIATE: the write
-- lock serializes relay claims, so the busy test sees every committed claim. An aggregate with
-- a push row in processing, whatever its lease, is skipped whole; NULL aggregates are never
-- busy. The candidates are read in (scheduled_at, created_at, id) order from
-- idx_inbox_push_pending, bounded by :cand_limit = min(max(3 x limit, 50), 500) (RLY-4); then
-- the first row per aggregate is kept (each NULL aggregate row is its own group), and at most
-- :limit rows. RETURNING comes back in no particular order: the store orders the answer.
-- :limit = rows requested, :cand_limit = candidate bound, :lease_ms = lease in ms,
-- :sources = JSON array of source names.
UPDATE "{inbox}"
SET "{state}" = 'processing',
    "{claim_token}" = lower(hex(randomblob(4)) || '-' || hex(randomblob(2)) || '-4' ||
                      substr(hex(randomblob(2)), 2) || '-' ||
                      substr('89ab', 1 + (abs(random()) % 4), 1) ||
                      substr(hex(randomblob(2)), 2) || '-' || hex(randomblob(6))),
    "{claimed_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now'),
    "{lease_expires_at}" = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', printf('%+.3f seconds', :lease_ms / 1000.0))
WHERE "{id}" IN (
        SELECT f.id
        FROM (SELECT c.id, c.scheduled_at, c.created_at, c.aggregate_id,
                     row_number() OVER (PARTITION BY c.aggregate_id
                                        ORDER BY c.scheduled_at, c.created_at, c.id) AS rank
              FROM (SELECT i."{id}" AS id, i."{aggregate_id}" AS aggregate_id,
                           i."{scheduled_at}" AS scheduled_at, i."{created_at}" AS created_at
                    FROM "{inbox}" i
                    WHERE i."{consumption}" = 'push'
                      AND i."{state}" = 'pending'
                      AND i."{scheduled_at}" <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')
                      AND i."{source}" IN (SELECT s.value FROM json_each(:sources) s)
                      AND (i."{aggregate_id}" IS NULL
                           OR NOT EXISTS (
                                SELECT 1 FROM "{inbox}" b
                                WHERE b."{aggregate_id}" = i."{aggregate_id}"
                                  AND b."{state}" = 'processing'
                                  AND b."{consumption}" = 'push'))
                    ORDER BY i."{scheduled_at}", i."{created_at}", i."{id}"
                    LIMIT :cand_limit) c) f
        WHERE f.aggregate_id IS NULL OR f.rank = 1
        ORDER BY f.scheduled_at, f.created_at, f.id
        LIMIT :limit)
  AND "{state}" = 'pending'
  AND "{consumption}" = 'push'
RETURNING "{id}", "{claim_token}", "{source}", "{idempotency_key}", "{aggregate_id}",
          "{event_type}", "{payload}", "{headers}", "{correlation_id}", "{scheduled_at}",
          "{created_at}"
