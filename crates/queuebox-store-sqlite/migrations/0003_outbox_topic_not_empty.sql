-- Version 3: outbox topic not empty
-- An outbox row with an empty topic can never be routed (schema.md: topic "Not empty"); the
-- INSERT is refused instead. SQLite cannot add a CHECK to an existing table (ALTER TABLE has
-- no ADD CONSTRAINT; the alternative is rebuilding the table, which would copy every row and
-- drop the application's own triggers and indexes on it), so two triggers refuse the row with
-- the error "ck_outbox_topic: the outbox topic must not be empty" (SQLITE_CONSTRAINT).
CREATE TRIGGER IF NOT EXISTS ck_outbox_topic_insert
BEFORE INSERT ON outbox
WHEN NEW.topic = ''
BEGIN
    SELECT RAISE(ABORT, 'ck_outbox_topic: the outbox topic must not be empty');
END;

CREATE TRIGGER IF NOT EXISTS ck_outbox_topic_update
BEFORE UPDATE OF topic ON outbox
WHEN NEW.topic = ''
BEGIN
    SELECT RAISE(ABORT, 'ck_outbox_topic: the outbox topic must not be empty');
END;
