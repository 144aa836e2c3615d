#!/bin/sh
# Runs the Go pull client's tests in module mode, offline: Debian's Go, and the modules go.mod
# requires served from Debian's golang-*-dev packages by a local file:// proxy
# (debian-goproxy.sh). Prints a final line "go: N passed, M failed".
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

# The drivers of the tests: PostgreSQL, SQLite (cgo, against Debian's libsqlite3) and MySQL/MariaDB.
packages="golang-go golang-github-lib-pq-dev golang-github-mattn-go-sqlite3-dev golang-github-go-sql-driver-mysql-dev gcc"
need() {
  command -v go >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1 &&
    [ -f /usr/share/gocode/src/github.com/lib/pq/go.mod ] &&
    [ -f /usr/share/gocode/src/github.com/mattn/go-sqlite3/go.mod ] &&
    [ -f /usr/share/gocode/src/github.com/go-sql-driver/mysql/go.mod ]
}
if ! need && [ "$(id -u)" = 0 ]; then
  # shellcheck disable=SC2086 # one word per package
  apt-get update -qq && apt-get install -y -qq $packages >/dev/null
fi
if ! need; then
  echo "test.sh: go, gcc or a driver package is missing (apt-get install $packages)" >&2
  echo "go: 0 passed, 1 failed"
  exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/queuebox-go.XXXXXX")
# The module cache is read-only by design; make it writable so it can be removed.
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT INT TERM
out=$work/test.log
if ! sh "$here/debian-goproxy.sh" "$work/proxy"; then
  echo "go: 0 passed, 1 failed"
  exit 1
fi

# Module mode against the local proxy only. The proxy's zips are Debian's trees, which cannot
# match sum.golang.org, so they skip the checksum database and their checksums go to a
# temporary go.sum: go.mod is copied and used through -modfile, and the checkout is not written.
export GO111MODULE=on GOPROXY="file://$work/proxy" GONOSUMDB=github.com/lib/pq,github.com/mattn/go-sqlite3,github.com/go-sql-driver/mysql GOFLAGS=
export GOMODCACHE="$work/modcache" GOPATH="$work/gopath"
export GOCACHE="${GOCACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/go-build}"
export QUEUEBOX_CONTRACT_DIR="$repo/clients/contract"
cp "$here/go.mod" "$work/go.mod"
modflags="-modfile=$work/go.mod -mod=mod"

cd "$here" || exit 1
# shellcheck disable=SC2086 # modflags is two flags
if go vet $modflags ./...; then vet_failed=0; else vet_failed=1; fi
# shellcheck disable=SC2086
go test $modflags -count=1 -v ./... 2>&1 | tee "$out"
passed=$(grep -c -- '--- PASS:' "$out")
failed=$(grep -c -- '--- FAIL:' "$out")
skipped=$(grep -c -- '--- SKIP:' "$out")
if grep -q '^FAIL' "$out" && [ "$failed" -eq 0 ]; then failed=1; fi   # build failure or panic
failed=$((failed + vet_failed))
echo "go: $skipped skipped (cases not applicable on a database, PULL-76)"
echo "go: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
