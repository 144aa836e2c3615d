-- Locking: none, a catalog read. Isolation: a read snapshot (WAL).
-- The unique indexes of one table, a UNIQUE constraint's and the primary key's included.
-- Partial indexes are left out: they cannot reject every repeat (SCH-60 item 3).
SELECT name
FROM pragma_index_list(:name)
WHERE "unique" = 1 AND partial = 0
