-- Version 3: outbox topic not empty
-- An outbox row with an empty topic can never be routed (schema.md: topic "Not empty"); the
-- INSERT is refused instead (MySQL error 3819, MariaDB error 4025, naming ck_outbox_topic).
-- MySQL and MariaDB check the rows already in the table too: a table holding a row with an
-- empty topic fails this version until that row is deleted or given a topic.
ALTER TABLE outbox ADD CONSTRAINT ck_outbox_topic CHECK (topic <> '');
