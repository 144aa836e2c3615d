#!/usr/bin/env bash
# The peer benchmark (docs/benchmarks.md, "Peer: pg-transactional-outbox"; issue 16 item 6):
# the same drain of N pending rows into the same receiver (qb-receiver, 127.0.0.1), in one run:
#   1. the npm package pg-transactional-outbox (polling listener) at its defaults
#      (nextMessagesBatchSize 5, nextMessagesPollingIntervalInMs 500),
#   2. the same package tuned (batch 100, poll 50 ms),
#   3. QueueBox (release build) at its defaults with `outbox.batchSize` 100.
# For each: msgs/s, the CPU time of its own process, and the CPU time of its database backends
# (the sessions with its application_name, read from /proc at the end of the drain).
# The package is installed by this script (`npm ci`, from the committed lock file) into
# bench/peer-node/node_modules (git-ignored).
#
#   bench/peer.sh                       # 2,000 rows (the peer at its defaults is slow here)
#   bench/peer.sh --rows 50000 --out /tmp/b.md
#
# Not part of scripts/test.sh: benchmarks are never timed tests.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
pg_url="${QUEUEBOX_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
rows=2000 out="docs/benchmarks.md"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rows) rows="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "peer.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
say() { echo "peer.sh: $* (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2; }

cargo build --release --quiet -p queuebox --bin queuebox -p queuebox-bench --bin qb-receiver
(cd bench/peer-node && npm ci --no-audit --no-fund --silent >/dev/null)

work="$(mktemp -d /tmp/qb-peer.XXXXXX)"
schema="qb_peer_$$"
recv_pid="" qb_pid=""
cleanup() {
    status=$?
    [[ -n "$qb_pid" ]] && kill -TERM "$qb_pid" 2>/dev/null && wait "$qb_pid" 2>/dev/null
    [[ -n "$recv_pid" ]] && kill -TERM "$recv_pid" 2>/dev/null && wait "$recv_pid" 2>/dev/null
    psql "$pg_url" -qAt -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
    for s in d t; do psql "$pg_url" -qAt -c "DROP SCHEMA IF EXISTS ${schema}_$s CASCADE" >/dev/null 2>&1 || true; done
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_receiver() {
    "$target/release/qb-receiver" --out "$work/$1.csv" >"$work/$1.port" 2>"$work/$1.recv.log" &
    recv_pid=$!
    for _ in $(seq 100); do grep -q '^port=' "$work/$1.port" 2>/dev/null && break; sleep 0.1; done
    port="$(sed -n 's/^port=//p' "$work/$1.port")"
}
stop_receiver() { kill -TERM "$recv_pid"; wait "$recv_pid" || true; recv_pid=""; }
host_port="${pg_url#*@}"; host_port="${host_port%%/*}"
pg_host="${host_port%:*}" pg_port="${host_port#*:}"
db="${pg_url##*/}"; db="${db%%\?*}"

uptime_before="$(uptime)"
declare -A R
peer() { # name batch poll
    start_receiver "$1"
    say "peer $1: $rows rows, batch $2, poll $3 ms"
    local line load0
    load0="$(cut -d' ' -f1-3 /proc/loadavg)"
    line="$(node bench/peer-node/peer.mjs "$pg_host" "$pg_port" "$db" "${schema}_$1" "$rows" \
        "http://127.0.0.1:$port" "$2" "$3" 2>"$work/$1.log")"
    R[$1.load]="$load0 → $(cut -d' ' -f1-3 /proc/loadavg)"
    stop_receiver
    for kv in $line; do R[$1.${kv%%=*}]="${kv#*=}"; done
}
peer d 5 500
peer t 100 50

# QueueBox on the same rows.
start_receiver qb
psql "$pg_url" -qAt -c "DROP SCHEMA IF EXISTS $schema CASCADE; CREATE SCHEMA $schema" >/dev/null
qb_url="$pg_url?sslmode=disable&application_name=qb_peer_queuebox&options=-c%20search_path%3D$schema"
cat >"$work/qb.yml" <<EOF
database:
  url: "$qb_url"
server:
  httpPort: 0
log:
  format: json
  level: info
outbox:
  batchSize: 100
destinations:
  receiver:
    type: http
    baseUrl: http://127.0.0.1:$port
    path: /events
routes:
  - topicPattern: "**"
    destination: receiver
EOF
"$target/release/queuebox" migrate --config "$work/qb.yml" >"$work/qb-migrate.log" 2>&1
"$target/release/queuebox" run --config "$work/qb.yml" >"$work/qb.log" 2>&1 &
qb_pid=$!
for _ in $(seq 100); do grep -q 'QueueBox started' "$work/qb.log" && break; sleep 0.1; done
say "queuebox: $rows rows"
load0="$(cut -d' ' -f1-3 /proc/loadavg)"
cpu0="$(awk '{print $14 + $15}' "/proc/$qb_pid/stat")"
t0="$(date +%s.%N)"
psql "$pg_url" -qAt -v ON_ERROR_STOP=1 <<EOF >/dev/null
SET search_path = $schema;
INSERT INTO outbox (topic, key, payload)
SELECT 'bench.order.created',
       CASE WHEN i % 10 = 0 THEN NULL ELSE 'k' || ((i - i / 10) % 1000) END,
       jsonb_build_object('orderId', i, 'customerId', 'customer-' || (i % 5000),
           'status', 'created', 'currency', 'EUR', 'amountCents', (i * 7919) % 100000,
           'lineCount', 1 + i % 7, 'channel', 'web', 'note', repeat('x', 44))
FROM generate_series(1, $rows) AS g(i);
ANALYZE outbox;
EOF
# Counting the sent rows ten times a second would read the table beside the drain it times
# (bench/scaling.sh says what that cost at 1,000,000 rows), so the receiver is asked for its
# count, and only then the table whether any row is still pending or processing.
until [[ "$(curl -s "http://127.0.0.1:$port/count")" -ge "$rows" ]] \
    && [[ "$(psql "$pg_url" -qAt -c "SELECT EXISTS (SELECT 1 FROM $schema.outbox WHERE state IN ('pending', 'processing'))")" == f ]]; do
    sleep 0.1
done
t1="$(date +%s.%N)"
cpu1="$(awk '{print $14 + $15}' "/proc/$qb_pid/stat")"
R[qb.db_cpu_s]="$(psql "$pg_url" -qAt -c "SELECT pid FROM pg_stat_activity WHERE application_name = 'qb_peer_queuebox'" \
    | while read -r pid; do awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null; done \
    | awk '{s += $1} END {printf "%.2f", s / 100}')"
R[qb.load]="$load0 → $(cut -d' ' -f1-3 /proc/loadavg)"
kill -TERM "$qb_pid"; wait "$qb_pid" || true; qb_pid=""
stop_receiver
R[qb.seconds]="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')"
R[qb.cpu_s]="$(awk -v a="$cpu0" -v b="$cpu1" 'BEGIN { printf "%.2f", (b - a) / 100 }')"
R[qb.rows]="$rows"
uptime_after="$(uptime)"

rate() { awk -v r="${R[$1.rows]}" -v s="${R[$1.seconds]}" 'BEGIN { printf "%d", r / s }'; }
ratio() { awk -v a="$(rate qb)" -v b="$(rate "$1")" 'BEGIN { printf "%.1f", a / b }'; }
section="$(cat <<EOF
<!-- peer-benchmark:begin: written by bench/peer.sh; edits inside are overwritten -->
## Peer: pg-transactional-outbox

Command: \`bench/peer.sh --rows $rows\`. Run $(date -u '+%Y-%m-%d %H:%M') UTC, commit \`$(git rev-parse --short HEAD)\`; $(nproc) cores (\`uptime\` before: \`${uptime_before# }\`; after: \`${uptime_after# }\`).

The same $rows pending rows (every tenth without a key, the others \`k0\`..\`k999\`; ~200 bytes of JSON) drained into the same \`qb-receiver\`, one after the other in this run. The peer is the npm package \`pg-transactional-outbox\` 0.5.7 with its polling listener, its own table and \`next_outbox_messages\` function (made by its \`DatabaseSetup\` helper), the key as its \`segment\` (sequential per segment, as QueueBox keeps order per key), a publisher that POSTs each message with Node's \`fetch\`. CPU time: the process's own, and its database backends' (the sessions with its \`application_name\`, from \`/proc\` at the end of the drain).

| | msgs/s | time | process CPU | database backends' CPU | QueueBox's rate / this | load before → after |
|---|---|---|---|---|---|---|
| pg-transactional-outbox, defaults (batch 5, poll 500 ms) | $(rate d) | ${R[d.seconds]} s | ${R[d.cpu_s]} s | ${R[d.db_cpu_s]} s | $(ratio d) × | ${R[d.load]} |
| pg-transactional-outbox, tuned (batch 100, poll 50 ms) | $(rate t) | ${R[t.seconds]} s | ${R[t.cpu_s]} s | ${R[t.db_cpu_s]} s | $(ratio t) × | ${R[t.load]} |
| **QueueBox**, defaults, \`batchSize\` 100 | **$(rate qb)** | ${R[qb.seconds]} s | ${R[qb.cpu_s]} s | ${R[qb.db_cpu_s]} s | 1 × | ${R[qb.load]} |

The peer's claim function reads every unprocessed row to find the oldest of each segment (\`DISTINCT ON (segment)\`) and then locks rows one at a time, so its cost per claim grows with the backlog; it also logs lock conflicts between its own workers (\`could not obtain lock on row\`) and retries those messages.
<!-- peer-benchmark:end -->
EOF
)"
echo "$section"
python3 - "$out" "$section" <<'EOF'
import sys
path, section = sys.argv[1], sys.argv[2]
begin = "<!-- peer-benchmark:begin"
end = "<!-- peer-benchmark:end -->"
page = open(path).read()
if begin in page and end in page:
    b = page.index(begin); e = page.index(end) + len(end)
    page = page[:b] + section + page[e:]
else:
    page = page.rstrip("\n") + "\n\n" + section + "\n"
open(path, "w").write(page)
EOF
say "wrote the peer section of $out"
