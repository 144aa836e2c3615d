-- Locking: DDL under the migration lock. Isolation: READ COMMITTED.
-- DDL under the migration lock (SCH-24/25); migration creates only the default table name.
CREATE OR REPLACE TRIGGER queuebox_outbox_notify
    AFTER INSERT ON outbox
    FOR EACH STATEMENT
    EXECUTE FUNCTION queuebox_outbox_notify()
