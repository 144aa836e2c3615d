-- Locking: none, a catalog read. Isolation: READ COMMITTED.
-- Catalog read, no locks. A base table of this name in the database of the URL only (SCH-2):
-- QueueBox never qualifies a name. BINARY: the name matches letter for letter, as the
-- server's own lookup does with lower_case_table_names = 0.
SELECT COUNT(*)
FROM information_schema.tables
WHERE table_schema = DATABASE()
  AND BINARY table_name = :name
  AND table_type = 'BASE TABLE'
