-- Locking: victims FOR UPDATE SKIP LOCKED, then deleted; the DELETE repeats the state guard. Isolation: READ COMMITTED.
-- Bulk delete, one chunk (ADM-9, ADM-20): at most :chunk matching rows of one state (2 sent,
-- 3 dead, mapped to the literal in the file, SCH-9), lowest sequence first. A row that changed
-- state after the read (a replay) fails the guard and stays.
-- Filters (ADM-13): a NULL parameter is no filter; an empty array matches nothing. The error
-- filter is strpos, a literal substring: no LIKE wildcard or escape character applies.
WITH victims AS MATERIALIZED (
    SELECT o."{id}" AS id
    FROM "{outbox}" o
    WHERE o."{state}" = CASE :state::int4 WHEN 2 THEN 'sent' WHEN 3 THEN 'dead' END
      AND (:ids::uuid[] IS NULL OR o."{id}" = ANY (:ids::uuid[]))
      AND (:topics::text[] IS NULL OR o."{topic}" = ANY (:topics::text[]))
      AND (:key::text IS NULL OR o."{key}" = :key::text)
      AND (:created_after::timestamptz IS NULL OR o."{created_at}" > :created_after::timestamptz)
      AND (:created_before::timestamptz IS NULL OR o."{created_at}" < :created_before::timestamptz)
      AND (:error_contains::text IS NULL OR strpos(o."{last_error}", :error_contains::text) > 0)
    ORDER BY o."{sequence}"
    LIMIT :chunk::bigint
    FOR UPDATE OF o SKIP LOCKED
)
DELETE FROM "{outbox}" d
USING victims v
WHERE d."{id}" = v.id
  AND d."{state}" = CASE :state::int4 WHEN 2 THEN 'sent' WHEN 3 THEN 'dead' END
