-- Locking: the rows the insert of the same transaction just stored, which no other transaction can hold. Isolation: READ COMMITTED.
-- Keep the raw bodies of those rows (storeRawBody, issue 15): only ids the insert returned come
-- here, so a duplicate never overwrites the body of the row it repeats. raw_body is not mapped
-- (database.columnMapping has no key for it).
-- :ids = stored row ids, :raw_bodies = their body bytes (both arrays of one length).
UPDATE "{inbox}" AS i
SET raw_body = r.raw_body
FROM unnest(:ids::uuid[], :raw_bodies::bytea[]) AS r(id, raw_body)
WHERE i."{id}" = r.id
