module github.com/alternayte/queuebox/clients/go

// Go 1.19 is what Debian bookworm ships; the code needs 1.18 (any) at least.
go 1.19

// The library imports database/sql only. lib/pq, go-sqlite3 and go-sql-driver/mysql are the
// drivers of the tests (and lib/pq of example/, the README example); an application picks its
// own driver. The versions are Debian bookworm's golang-*-dev packages (debian-goproxy.sh).
require (
	github.com/go-sql-driver/mysql v1.5.0
	github.com/lib/pq v1.10.7
	github.com/mattn/go-sqlite3 v1.14.16
)
