package inbox

import (
	"database/sql"
	"testing"
)

// PGFixtureForTests lends the external tests (package inbox_test, which see only the public
// API) a PostgreSQL fixture: the worker's connections, and helpers that insert a pull row of
// source "orders" and read a row's state and its application rows.
func PGFixtureForTests(t *testing.T) (db *sql.DB, insert func(ref string) string, state func(id string) string, appRows func(id string) int) {
	f := newFixture(t, Schema{})
	insert = func(ref string) string { return f.insert(row{ref: ref, source: "orders"}) }
	state = func(id string) string { return f.get(id).state }
	return f.db, insert, state, f.appRows
}
