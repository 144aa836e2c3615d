-- Locking: none, a catalog read. Isolation: READ COMMITTED.
-- Catalog read at connect, no locks: the name of a unique index on the id column alone, the
-- primary key first (the inbox's), for the FORCE INDEX of the statements that find rows by a
-- JSON array of ids. No row: the table is missing (QueueBox creates it with uq_outbox_id or
-- PRIMARY) or has no such index, and those statements go without the hint.
-- :name = table name, :column = id column name.
SELECT s.index_name
FROM information_schema.statistics s
WHERE s.table_schema = DATABASE()
  AND BINARY s.table_name = :name
  AND s.non_unique = 0
GROUP BY s.index_name
HAVING COUNT(*) = 1 AND MAX(s.column_name) = :column AND MAX(s.sub_part) IS NULL
ORDER BY s.index_name = 'PRIMARY' DESC, s.index_name
LIMIT 1
