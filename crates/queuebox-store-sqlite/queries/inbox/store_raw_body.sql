-- Locking: the database write lock (BEGIN IMMEDIATE), in the insert's transaction. Isolation: serializable.
-- Keep the raw body of one row the insert of the same transaction just stored (storeRawBody,
-- issue 15); only ids the insert returned come here, so a duplicate never overwrites the body
-- of the row it repeats. raw_body is not mapped (database.columnMapping has no key for it).
-- :id = the stored row id, :raw_body = its body bytes.
UPDATE "{inbox}" SET raw_body = :raw_body WHERE "{id}" = :id
