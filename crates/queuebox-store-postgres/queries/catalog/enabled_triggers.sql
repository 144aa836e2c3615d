-- Locking: none, a catalog read. Isolation: READ COMMITTED.
-- Catalog read, no locks. User triggers of one table that fire ('D' means disabled).
SELECT t.tgname::text
FROM pg_catalog.pg_trigger t
WHERE t.tgrelid = :oid
  AND NOT t.tgisinternal
  AND t.tgenabled <> 'D'
