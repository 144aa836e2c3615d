-- Catalog read, no locks. The live columns of one table.
SELECT a.attname::text
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = $1
  AND a.attnum > 0
  AND NOT a.attisdropped
