-- Locking: the row the insert of the same transaction just stored, which no other transaction can hold. Isolation: READ COMMITTED.
-- Keep the raw body of one row the insert of the same transaction just stored (storeRawBody,
-- issue 15); only ids the insert stored come here, so a duplicate never overwrites the body of
-- the row it repeats. raw_body is not mapped (database.columnMapping has no key for it).
-- :id = the stored row id, :raw_body = its body bytes.
UPDATE `{inbox}` SET raw_body = :raw_body WHERE `{id}` = :id
