module github.com/alternayte/queuebox/clients/go

// Go 1.19 is what Debian bookworm ships; the code needs 1.18 (any) at least.
go 1.19

// The library imports database/sql only. lib/pq is the PostgreSQL driver of the tests and of
// example/ (the README example); an application picks its own driver.
require github.com/lib/pq v1.10.7
