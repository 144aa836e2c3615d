#!/usr/bin/env bash
# The outbox benchmark (docs/benchmarks.md, "Outbox: drain and steady"): builds the release
# `queuebox` and the bench binaries, then runs qb-bench, which measures the SQL floor, two
# drains of 100,000 rows, the floor again and a steady producer against the local PostgreSQL
# (postgres://postgres@127.0.0.1:5432/test), and rewrites the outbox section of
# docs/benchmarks.md. Extra arguments go to qb-bench (`--help` lists them).
#
#   bench/outbox.sh                      # the documented run, about 2 minutes
#   bench/outbox.sh --rows 10000 --out /tmp/b.md --steady-seconds 5   # a quick try
#
# Not part of scripts/test.sh: benchmarks are never timed tests.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
pg_url="${QUEUEBOX_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"

cargo build --release --quiet -p queuebox -p queuebox-bench

bench_pid=""
cleanup() {
    status=$?
    # qb-bench kills its children and drops its schemas itself, also when interrupted; this
    # is the backstop for a qb-bench that was killed outright.
    if [[ -n "$bench_pid" ]] && kill -0 "$bench_pid" 2>/dev/null; then
        kill -TERM "$bench_pid" 2>/dev/null || true
        wait "$bench_pid" 2>/dev/null || true
    fi
    if [[ -n "$bench_pid" ]] && command -v psql >/dev/null; then
        psql "$pg_url" -qAt -v ON_ERROR_STOP=0 -c "
            SELECT format('DROP SCHEMA IF EXISTS %I CASCADE', nspname)
            FROM pg_namespace WHERE nspname LIKE 'qb\_bench\_${bench_pid}\_%'" 2>/dev/null \
            | psql "$pg_url" -qAt 2>/dev/null >/dev/null || true
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "uptime before: $(uptime)" >&2
"$target/release/qb-bench" --queuebox "$target/release/queuebox" --pg-url "$pg_url" "$@" &
bench_pid=$!
status=0
wait "$bench_pid" || status=$?
echo "uptime after: $(uptime)" >&2
exit "$status"
