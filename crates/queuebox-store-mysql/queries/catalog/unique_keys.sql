-- Locking: none, a catalog read. Isolation: READ COMMITTED.
-- Catalog read, no locks. The columns of every unique index of one table (a unique constraint
-- is one; MySQL names the primary key PRIMARY), one row per column. An index on a prefix of a
-- column (sub_part) or on an expression (no column_name) cannot reject every repeat of
-- (source, idempotency_key), so such an index is left out whole (SCH-60 item 3).
SELECT s.index_name, s.column_name
FROM information_schema.statistics s
WHERE s.table_schema = DATABASE()
  AND BINARY s.table_name = :name
  AND s.non_unique = 0
  AND NOT EXISTS (
        SELECT 1 FROM information_schema.statistics p
        WHERE p.table_schema = s.table_schema
          AND p.table_name = s.table_name
          AND p.index_name = s.index_name
          AND (p.sub_part IS NOT NULL OR p.column_name IS NULL))
ORDER BY s.index_name, s.seq_in_index
