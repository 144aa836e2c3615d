-- Locking: none, a catalog read. Isolation: READ COMMITTED.
-- Catalog read, no locks. The live columns of one table.
SELECT a.attname::text
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = :oid
  AND a.attnum > 0
  AND NOT a.attisdropped
