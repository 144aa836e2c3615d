#!/usr/bin/env bash
# The admin API at 1,000,000 rows per table (docs/admin.md, "How fast at a million rows"):
# fills one PostgreSQL schema with N outbox rows (90 % sent, 9 % dead, 1 % pending, over 20
# topics) and N inbox rows (the same shares, processed instead of sent, over 10 sources),
# starts `queuebox run` with the admin API on it, and times GET /admin/stats and the list
# endpoints (first page, a page deep in the list, with and without filters) with curl: the
# median and the slowest of 7 calls after one warm-up call, plus the plan of each query.
#
#   bench/admin.sh                      # the documented run: 1,000,000 rows, release build
#   bench/admin.sh --rows 100000        # a quick try
#   ADMIN_BENCH_BIN=target/debug/queuebox bench/admin.sh   # skip the release build
#
# Not part of scripts/test.sh: benchmarks are never timed tests.
set -euo pipefail

rows=1000000
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rows) rows="$2"; shift 2 ;;
        *) echo "unknown argument $1" >&2; exit 2 ;;
    esac
done

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
pg_url="${QUEUEBOX_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
schema="qb_admin_bench_$$"
work="$(mktemp -d /tmp/qb-admin-bench.XXXXXX)"
pid=""
cleanup() {
    [[ -n "$pid" ]] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    psql -q "$pg_url" -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

if [[ -n "${ADMIN_BENCH_BIN:-}" ]]; then
    bin="$ADMIN_BENCH_BIN"
    build="the binary $ADMIN_BENCH_BIN"
else
    target="${CARGO_TARGET_DIR:-$root/target}"
    cargo build --release --quiet -p queuebox --bin queuebox
    bin="$target/release/queuebox"
    build="release build"
fi
cp "$bin" "$work/queuebox"

db_url="${pg_url}?sslmode=disable&options=-c%20search_path%3D${schema}"
token="bench-token"
cat > "$work/queuebox.yml" <<YAML
database:
  url: "$db_url"
server:
  httpPort: 0
outbox:
  pollIntervalMs: 3600000
destinations:
  a:
    type: http
    baseUrl: http://127.0.0.1:9
  b:
    type: http
    baseUrl: http://127.0.0.1:9
routes:
  - topicPattern: "t.1*"
    destination: b
  - topicPattern: "**"
    destination: a
admin:
  enabled: true
  auth:
    type: bearer
    token: $token
YAML

psql -q "$pg_url" -c "CREATE SCHEMA $schema" >/dev/null
"$work/queuebox" migrate --config "$work/queuebox.yml" 2> "$work/migrate.log" || { cat "$work/migrate.log" >&2; exit 1; }
fill_start=$(date +%s)
# Pending rows are scheduled far ahead, so the poller (also slowed to one poll an hour) leaves
# them as they are during the run.
psql -q "$db_url" <<SQL >/dev/null
SET synchronous_commit = off;
INSERT INTO outbox (topic, key, payload, state, last_error, scheduled_at, created_at, updated_at)
SELECT 't.' || (i % 20), 'k' || (i % 1000), jsonb_build_object('n', i),
       CASE WHEN i % 100 = 0 THEN 'pending' WHEN i % 100 < 10 THEN 'dead' ELSE 'sent' END,
       CASE WHEN i % 100 BETWEEN 1 AND 9 THEN 'HTTP 500 from the receiver' END,
       now() + interval '1 day',
       now() - (($rows - i) * interval '1 millisecond'),
       now() - (($rows - i) * interval '1 millisecond') + interval '2 seconds'
FROM generate_series(1, $rows) i;
INSERT INTO inbox (source, idempotency_key, payload, state, consumption, created_at, scheduled_at)
SELECT 's' || (i % 10), 'evt-' || i, jsonb_build_object('n', i),
       CASE WHEN i % 100 = 0 THEN 'pending' WHEN i % 100 < 10 THEN 'dead' ELSE 'processed' END,
       CASE WHEN i % 2 = 0 THEN 'push' ELSE 'pull' END,
       now() - (($rows - i) * interval '1 millisecond'), now() + interval '1 day'
FROM generate_series(1, $rows) i;
VACUUM ANALYZE outbox;
VACUUM ANALYZE inbox;
SQL
fill_seconds=$(( $(date +%s) - fill_start ))

"$work/queuebox" run --config "$work/queuebox.yml" 2> "$work/log" &
pid=$!
port=""
for _ in $(seq 100); do
    port="$(grep -o '"httpPort":[0-9]*' "$work/log" | head -1 | cut -d: -f2 || true)"
    [[ -n "$port" ]] && break
    sleep 0.2
done
[[ -n "$port" ]] || { cat "$work/log" >&2; exit 1; }

# One page deep in the dead list: follow 20 cursors of 500 rows first.
deep_cursor() {
    local table="$1" state="$2" cursor="" next=""
    for _ in $(seq 20); do
        next="$(curl -sf -H "Authorization: Bearer $token" \
            "http://127.0.0.1:$port/admin/$table/messages?state=$state&limit=500${cursor:+&cursor=$cursor}" \
            | jq -r .nextCursor)"
        [[ "$next" == "null" ]] && break
        cursor="$next"
    done
    echo "$cursor"
}
outbox_deep="$(deep_cursor outbox dead)"
inbox_deep="$(deep_cursor inbox dead)"

measure() {
    local label="$1" path="$2" times=()
    curl -sf -o /dev/null -H "Authorization: Bearer $token" "http://127.0.0.1:$port$path"
    for _ in $(seq 7); do
        times+=("$(curl -sf -o /dev/null -w '%{time_total}' -H "Authorization: Bearer $token" "http://127.0.0.1:$port$path")")
    done
    printf '%s\n' "${times[@]}" | sort -n | awk -v label="$label" '
        { t[NR] = $1 * 1000 }
        END { printf "| %s | %.1f | %.1f |\n", label, t[4], t[NR] }'
}

echo "uptime before: $(uptime)" >&2
cat <<EOT
### Admin API at $rows rows per table ($(date -u '+%Y-%m-%d %H:%M'), $(git rev-parse --short HEAD))

$build, PostgreSQL $(psql -Atq "$pg_url" -c 'SHOW server_version'), $(nproc) cores ($(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)),
load average before the run: $(cut -d' ' -f1-3 /proc/loadavg). Filling the tables took ${fill_seconds} s.
Milliseconds per call as curl sees it (the HTTP round trip included), median and slowest of 7.

| Call | Median ms | Slowest ms |
|---|---|---|
EOT
measure "GET /admin/stats" "/admin/stats"
measure "outbox list, dead, first page of 50" "/admin/outbox/messages?state=dead"
measure "outbox list, dead, page after 10,000 rows" "/admin/outbox/messages?state=dead&cursor=$outbox_deep"
measure "outbox list, sent, first page of 500" "/admin/outbox/messages?state=sent&limit=500"
measure "outbox list, dead, topic=t.3" "/admin/outbox/messages?state=dead&topic=t.3"
measure "outbox list, dead, destination=b" "/admin/outbox/messages?state=dead&destination=b"
measure "outbox list, dead, errorContains=500" "/admin/outbox/messages?state=dead&errorContains=500"
measure "inbox list, dead, first page of 50" "/admin/inbox/messages?state=dead"
measure "inbox list, dead, page after 10,000 rows" "/admin/inbox/messages?state=dead&cursor=$inbox_deep"
measure "inbox list, dead, source=s3" "/admin/inbox/messages?state=dead&source=s3"
echo "uptime after: $(uptime)" >&2
echo
echo "Plans (EXPLAIN ANALYZE) of the counts behind /admin/stats and the first dead page:"
echo
echo '```text'
psql -Atq "$db_url" <<'SQL'
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) SELECT topic::text, state::text, count(*) FROM outbox WHERE state IN ('pending', 'processing', 'dead') GROUP BY 1, 2;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) SELECT source::text, state::text, count(*) FROM inbox WHERE state IN ('pending', 'processing', 'dead') GROUP BY 1, 2;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY ON) SELECT id FROM outbox WHERE state = 'dead' ORDER BY created_at DESC, id DESC LIMIT 51;
SQL
echo '```'
