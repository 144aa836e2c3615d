-- Version 5: outbox state created index
-- The admin lists (operations.md ADM-11) take the rows of one state newest first by
-- (created_at, id) after a keyset cursor; idx_outbox_state_updated orders by updated_at, so a
-- list read and sorted every row of the state. This index answers a page by reading one page
-- backwards. topic is carried (INCLUDE, not part of the order), so GET /admin/stats counts the
-- rows of a state per topic from the index alone (an index-only scan), never from the table.
-- It is built inside the version's transaction (SCH-46), which blocks writes to the outbox
-- while it builds (seconds per million rows). On a large outbox, create it beforehand with
-- CREATE INDEX CONCURRENTLY, the same name and the same columns: IF NOT EXISTS then skips it.
CREATE INDEX IF NOT EXISTS idx_outbox_state_created ON outbox (state, created_at, id) INCLUDE (topic);
