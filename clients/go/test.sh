#!/bin/sh
# Runs the Go pull client's tests: Debian's Go and pgx, GOPATH mode, offline.
# Prints a final line "go: N passed, M failed".
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)

if ! command -v go >/dev/null 2>&1 || [ ! -d /usr/share/gocode/src/github.com/jackc/pgx/v4/stdlib ]; then
  if [ "$(id -u)" = 0 ]; then
    apt-get update -qq && apt-get install -y -qq golang-go golang-github-jackc-pgx-v4-dev >/dev/null
  fi
fi
if ! command -v go >/dev/null 2>&1 || [ ! -d /usr/share/gocode/src/github.com/jackc/pgx/v4/stdlib ]; then
  echo "test.sh: go or golang-github-jackc-pgx-v4-dev is missing (apt-get install golang-go golang-github-jackc-pgx-v4-dev)" >&2
  echo "go: 0 passed, 1 failed"
  exit 1
fi

gopath=$(mktemp -d "${TMPDIR:-/tmp}/queuebox-go.XXXXXX")
out=$gopath/test.log
trap 'rm -rf "$gopath"' EXIT INT TERM
mkdir -p "$gopath/src/github.com/alternayte"
# The whole repository is linked, so the package sits at its import path and the tests find
# ../contract (the language-neutral contract) by relative path.
ln -s "$repo" "$gopath/src/github.com/alternayte/queuebox"
pkgdir=$gopath/src/github.com/alternayte/queuebox/clients/go

export GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOFLAGS= GOPROXY=off
export GOCACHE="${GOCACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/go-build}"
export QUEUEBOX_CONTRACT_DIR="$repo/clients/contract"

cd "$pkgdir" || exit 1
status=0
if ! go vet ./... ; then
  status=1
  vet_failed=1
else
  vet_failed=0
fi
go test -count=1 -v ./... 2>&1 | tee "$out"
passed=$(grep -c -- '--- PASS:' "$out")
failed=$(grep -c -- '--- FAIL:' "$out")
skipped=$(grep -c -- '--- SKIP:' "$out")
if grep -q '^FAIL' "$out" && [ "$failed" -eq 0 ]; then failed=1; fi   # build failure or panic
failed=$((failed + vet_failed))
echo "go: $skipped skipped (not applicable on PostgreSQL)"
echo "go: $passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$status" -eq 0 ]
