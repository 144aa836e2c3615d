-- Version 5: outbox state created index
-- The admin lists (operations.md ADM-11) take the rows of one state newest first by
-- (created_at, id) after a keyset cursor; idx_outbox_state_updated orders by updated_at, so a
-- list read and sorted every row of the state. This index answers a page by reading one page
-- backwards. topic comes last (id is unique, so it never changes the order): GET /admin/stats
-- counts the rows of a state per topic from the index alone. id is named: the outbox's primary
-- key is sequence, which InnoDB appends to every secondary index instead.
-- MySQL has no CREATE INDEX IF NOT EXISTS: information_schema decides (schema.md SCH-45).
-- InnoDB builds it online (LOCK=NONE): writes to the outbox go on meanwhile.
SET @queuebox_ddl = (SELECT IF(COUNT(*) = 0,
    'ALTER TABLE outbox ADD INDEX idx_outbox_state_created (state, created_at, id, topic), ALGORITHM = INPLACE, LOCK = NONE',
    'DO 0')
    FROM information_schema.statistics
    WHERE table_schema = DATABASE() AND table_name = 'outbox'
      AND index_name = 'idx_outbox_state_created');
PREPARE queuebox_ddl FROM @queuebox_ddl;
EXECUTE queuebox_ddl;
DEALLOCATE PREPARE queuebox_ddl;
