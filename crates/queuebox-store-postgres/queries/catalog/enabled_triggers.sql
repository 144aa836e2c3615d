-- Catalog read, no locks. User triggers of one table that fire ('D' means disabled).
SELECT t.tgname::text
FROM pg_catalog.pg_trigger t
WHERE t.tgrelid = $1
  AND NOT t.tgisinternal
  AND t.tgenabled <> 'D'
