-- Locking: none, a catalog read. Isolation: a read snapshot (WAL).
-- The columns of one index; an expression column has a NULL name.
SELECT name
FROM pragma_index_info(:name)
