-- Locking: none, a catalog read. Isolation: READ COMMITTED.
-- Catalog read, no locks. The columns of every valid unique index of one table; a unique
-- constraint has one too. Partial and expression indexes are left out: they cannot reject
-- every repeat of (source, idempotency_key) (SCH-60 item 3).
SELECT ARRAY(
           SELECT a.attname::text
           FROM unnest(i.indkey::int2[]) AS k(attnum)
           JOIN pg_catalog.pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
       )
FROM pg_catalog.pg_index i
WHERE i.indrelid = :oid
  AND i.indisunique
  AND i.indisvalid
  AND i.indpred IS NULL
  AND i.indexprs IS NULL
