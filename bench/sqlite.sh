#!/usr/bin/env bash
# The SQLite benchmark (docs/benchmarks.md, "SQLite: outbox drain and HTTP intake beside
# PostgreSQL"): builds the release `queuebox` and qb-sqlite-bench, then measures, in one run,
# the outbox floor, a drain of 100,000 rows on a SQLite file and the same drain on the local
# PostgreSQL, the floor again; the intake floor, HTTP intake with wrk on SQLite and on
# PostgreSQL, the floor again. It prints the markdown section; paste it into
# docs/benchmarks.md. Needs wrk and psql (QUEUEBOX_BENCH_PG_URL for another PostgreSQL).
#
#   bench/sqlite.sh                          # the documented run, about 2 minutes
#   bench/sqlite.sh --rows 10000 --seconds 3 # a quick try
#
# Not part of scripts/test.sh: benchmarks are never timed tests.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')}"
pg_url="${QUEUEBOX_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"

cargo build --release --quiet -p queuebox -p queuebox-bench --bin queuebox --bin qb-sqlite-bench

work="$(mktemp -d /tmp/qb-sqlite-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# The target folder may be shared with other checkouts: run copies of this build's binaries.
cp "$target/release/queuebox" "$target/release/qb-sqlite-bench" "$work/"

echo "uptime before: $(uptime)" >&2
"$work/qb-sqlite-bench" --queuebox "$work/queuebox" --pg-url "$pg_url" \
    --lua "$root/bench/inbox-intake.lua" --work "$work/run" "$@"
echo "uptime after: $(uptime)" >&2
