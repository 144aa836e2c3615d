-- Locking: DDL under the migration lock. Isolation: READ COMMITTED.
-- DDL under the migration lock (SCH-24/25). The function sends whatever table fires it.
CREATE OR REPLACE FUNCTION queuebox_outbox_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('queuebox_outbox', TG_TABLE_NAME);
    RETURN NULL;
END
$$
