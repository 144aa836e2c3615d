-- Version 3: outbox topic not empty
-- An outbox row with an empty topic can never be routed (schema.md: topic "Not empty"); the
-- INSERT is refused instead (SQLSTATE 23514, check_violation, naming ck_outbox_topic).
-- NOT VALID: rows already in the table are not checked, so a table that holds such a row
-- (dead by now) still migrates; every new or updated row is.
ALTER TABLE outbox ADD CONSTRAINT ck_outbox_topic CHECK (topic <> '') NOT VALID;
