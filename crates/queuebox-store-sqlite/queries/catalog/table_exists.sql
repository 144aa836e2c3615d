-- Locking: none, a catalog read. Isolation: a read snapshot (WAL).
-- A table of the main database (SCH-2); QueueBox never qualifies a name.
SELECT count(*)
FROM sqlite_schema
WHERE type = 'table' AND name = :name
