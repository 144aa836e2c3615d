-- Locking: none, a catalog read. Isolation: READ COMMITTED.
-- Catalog read, no locks. A table in the first schema of search_path only (SCH-2): QueueBox
-- never qualifies a name, and a table of the same name further down the path is not its own.
SELECT c.oid
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema()
  AND c.relname = :name
  AND c.relkind IN ('r', 'p')
