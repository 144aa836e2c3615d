-- Locking: none, a catalog read. Isolation: READ COMMITTED.
-- Catalog read, no locks. The columns of one table.
SELECT column_name
FROM information_schema.columns
WHERE table_schema = DATABASE()
  AND BINARY table_name = :name
