-- Locking: a transaction-scoped advisory lock per inbox table. Isolation: READ COMMITTED.
-- The relay's claim lock (RLY-6): one transaction-scoped advisory lock per inbox table, taken
-- as the first statement of the claim transaction and released by its COMMIT or ROLLBACK. The
-- claim that follows is a later statement, so its snapshot already sees the rows the previous
-- lock holder claimed.
-- :table_name = the inbox table name (as configured, unquoted).
SELECT pg_advisory_xact_lock(hashtextextended('queuebox_inbox_claim_' || :table_name::text, 0))
