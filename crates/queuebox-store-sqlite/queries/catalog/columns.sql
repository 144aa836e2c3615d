-- Locking: none, a catalog read. Isolation: a read snapshot (WAL).
-- The columns of one table.
SELECT name
FROM pragma_table_info(:name)
