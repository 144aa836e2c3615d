-- Version 5: outbox state created index
-- The admin lists (operations.md ADM-11) take the rows of one state newest first by
-- (created_at, id) after a keyset cursor; idx_outbox_state_updated orders by updated_at, so a
-- list read and sorted every row of the state. This index answers a page by reading one page
-- backwards. topic comes last (id is unique, so it never changes the order): GET /admin/stats
-- counts the rows of a state per topic from the index alone (a covering index).
CREATE INDEX IF NOT EXISTS idx_outbox_state_created ON outbox (state, created_at, id, topic);
