-- Locking: none, read only. Isolation: READ COMMITTED.
-- Operator list of outbox rows (ADM-11, ADM-16, ADM-17): the rows of one state, newest first by
-- (created_at, id), after the keyset cursor (:after_created_at NULL on the first page). The
-- state is a code mapped to its literal in the file (SCH-9): 0 pending, 1 processing, 2 sent,
-- 3 dead. The store asks for one row more than the page, to know whether another page follows.
-- Index: idx_outbox_state_created (state, created_at, id) of migration 5, read backwards from
-- the cursor: a page reads about one page of rows, however many the state holds.
-- Filters (ADM-13): a NULL parameter is no filter; an empty array matches nothing. The error
-- filter is strpos, a literal substring: no LIKE wildcard or escape character applies.
SELECT o."{id}" AS id, o."{topic}"::text AS topic, NULLIF(o."{key}", '')::text AS key,
       o."{aggregate_type}"::text AS aggregate_type, o."{state}"::text AS state,
       o."{attempt}" AS attempt, o."{max_attempts}" AS max_attempts,
       o."{scheduled_at}" AS scheduled_at, o."{created_at}" AS created_at,
       o."{updated_at}" AS updated_at, o."{last_error}" AS last_error
FROM "{outbox}" o
WHERE o."{state}" = CASE :state::int4
    WHEN 0 THEN 'pending' WHEN 1 THEN 'processing' WHEN 2 THEN 'sent' WHEN 3 THEN 'dead' END
  AND (:ids::uuid[] IS NULL OR o."{id}" = ANY (:ids::uuid[]))
  AND (:topics::text[] IS NULL OR o."{topic}" = ANY (:topics::text[]))
  AND (:key::text IS NULL OR o."{key}" = :key::text)
  AND (:created_after::timestamptz IS NULL OR o."{created_at}" > :created_after::timestamptz)
  AND (:created_before::timestamptz IS NULL OR o."{created_at}" < :created_before::timestamptz)
  AND (:error_contains::text IS NULL OR strpos(o."{last_error}", :error_contains::text) > 0)
  AND (:after_created_at::timestamptz IS NULL
       OR (o."{created_at}", o."{id}") < (:after_created_at::timestamptz, :after_id::uuid))
ORDER BY o."{created_at}" DESC, o."{id}" DESC
LIMIT :limit::bigint
