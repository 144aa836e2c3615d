#!/usr/bin/env bash
# The MySQL/MariaDB benchmark (docs/benchmarks.md, "MySQL/MariaDB: outbox drain and HTTP intake
# beside PostgreSQL"): builds the release `queuebox` and qb-mysql-bench, then measures, in one
# run, the outbox floor (the MySQL store's own claim + mark statements in a loop, no delivery),
# a drain of 100,000 rows on MariaDB and the same drain on the local PostgreSQL, the floor
# again; the intake floor (the store's own inbox insert, one row at a time), HTTP intake with
# wrk on MariaDB and on PostgreSQL, the floor again. Each MariaDB phase uses a database of its
# own on the server (created and dropped). It prints the markdown section; paste it into
# docs/benchmarks.md. Needs wrk, psql and the mariadb client (QUEUEBOX_BENCH_PG_URL and
# QUEUEBOX_BENCH_MYSQL_URL for other servers).
#
#   bench/mysql.sh                          # the documented run
#   bench/mysql.sh --rows 10000 --seconds 3 # a quick try
#
# Not part of scripts/test.sh: benchmarks are never timed tests.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')}"
pg_url="${QUEUEBOX_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
mysql_url="${QUEUEBOX_BENCH_MYSQL_URL:-mysql://root@127.0.0.1:3306}"
scripts/services.sh wrk >/dev/null || { echo "mysql.sh: wrk is missing and could not be installed (apt-get install -y wrk)" >&2; exit 1; }
command -v mariadb >/dev/null || { echo "mysql.sh: the mariadb client is missing (apt-get install -y mariadb-client)" >&2; exit 1; }
scripts/services.sh postgres mariadb >/dev/null || { echo "mysql.sh: PostgreSQL or MariaDB is not up" >&2; exit 1; }

cargo build --release --quiet -p queuebox -p queuebox-bench --bin queuebox --bin qb-mysql-bench

work="$(mktemp -d /tmp/qb-mysql-bench.XXXXXX)"
trap 'rm -rf "$work"' EXIT
# The target folder may be shared with other checkouts: run copies of this build's binaries.
cp "$target/release/queuebox" "$target/release/qb-mysql-bench" "$work/"

echo "uptime before: $(uptime)" >&2
"$work/qb-mysql-bench" --queuebox "$work/queuebox" --pg-url "$pg_url" --mysql-url "$mysql_url" \
    --lua "$root/bench/inbox-intake.lua" --work "$work/run" "$@"
echo "uptime after: $(uptime)" >&2
