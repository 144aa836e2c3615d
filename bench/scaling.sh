#!/usr/bin/env bash
# The scaling benchmark (docs/benchmarks.md, "Outbox: scaling with the backlog"; issue 16 item 4):
# does the drain rate hold as the table grows? Against the local PostgreSQL, one phase after the
# other, each in a fresh schema migrated by `queuebox migrate`:
#
#   pending-N     N pending rows (10,000, 100,000, 1,000,000), drained by QueueBox at its
#                 defaults (`outbox.batchSize` 100) into qb-receiver, beside qb-sql-floor (claim +
#                 mark, no delivery) on a fresh copy of the same rows
#   sent-1M       50,000 pending rows behind 1,000,000 `sent` rows left in the table
#   retention     the same, with the 1,000,000 `sent` rows two days old and retention on
#                 (`AGE`, `maxAge: 1d`, its default batch of 1,000): retention deletes them while
#                 the drain runs; reported: the drain rate, how long the deletes took, and the
#                 longest gap between two deliveries at the receiver (a stall would show there)
#   hot-key       200,000 pending rows of one key, drained by QueueBox at its defaults (runs of
#                 `outbox.keyRunLength` 32, OUT-13a), the order checked at the receiver, beside
#                 the ceiling of one key: durable commits one after another (a row of a key goes
#                 out only after the previous one's `sent` is committed)
#
# For each QueueBox drain: msgs/s (the fill's COMMIT to the last row `sent`), the CPU time of
# QueueBox and of its database backends (the sessions with its application_name, from /proc at
# the end), and the claim statements (scans of idx_outbox_pending). The rows are the ones of
# bench/outbox.sh (every tenth without a key, the others k0..k999; ~200 bytes of JSON), inserted
# with `ANALYZE outbox` in the same transaction (autovacuum is off on this server).
#
#   bench/scaling.sh                              # the documented run, about 8 to 12 minutes
#   bench/scaling.sh --sizes "10000 50000" --sent 100000 --hot 5000 --out /tmp/s.md   # a quick try
#
# Not part of scripts/test.sh: benchmarks are never timed tests.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
bin_dir="${QUEUEBOX_BENCH_BIN_DIR:-$target/release}"
pg_url="${QUEUEBOX_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
sizes="10000 100000 1000000" sent=1000000 behind=50000 hot=200000 out="docs/benchmarks.md"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --sizes) sizes="$2"; shift 2 ;;
        --sent) sent="$2"; shift 2 ;;
        --behind) behind="$2"; shift 2 ;;
        --hot) hot="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "scaling.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
# QueueBox refuses unknown QUEUEBOX_* variables, so this script's own are not passed on.
unset QUEUEBOX_BENCH_BIN_DIR QUEUEBOX_BENCH_PG_URL
load() { cut -d' ' -f1-3 /proc/loadavg; }
say() { echo "scaling.sh: $* (load $(load))" >&2; }
psql_q() { PGOPTIONS='-c client_min_messages=warning' psql "$pg_url" -qAt -v ON_ERROR_STOP=1 "$@"; }

if [[ "$bin_dir" == "$target/release" ]]; then
    cargo build --release --quiet -p queuebox --bin queuebox -p queuebox-bench \
        --bin qb-receiver --bin qb-sql-floor
fi

work="$(mktemp -d /tmp/qb-scaling.XXXXXX)"
recv_pid="" qb_pid="" schemas=()
cleanup() {
    status=$?
    [[ -n "$qb_pid" ]] && kill -TERM "$qb_pid" 2>/dev/null && wait "$qb_pid" 2>/dev/null
    [[ -n "$recv_pid" ]] && kill -TERM "$recv_pid" 2>/dev/null && wait "$recv_pid" 2>/dev/null
    for s in "${schemas[@]}"; do psql_q -c "DROP SCHEMA IF EXISTS $s CASCADE" >/dev/null 2>&1 || true; done
    [[ $status -eq 0 ]] && rm -rf "$work" || echo "scaling.sh: kept $work" >&2
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The rows of bench/outbox.sh (bench/queuebox-bench/src/driver/pg.rs, INSERT_ROWS), numbered
# from $2 to $3, in the state given; `sent` rows get the state's columns as QueueBox leaves them.
# KEY_SQL replaces the key expression (the hot-key phase: every row under 'hot').
fill_sql() { # state from to [age]
    local state="$1" from="$2" to="$3" age="${4:-0 seconds}"
    cat <<EOF
INSERT INTO outbox (topic, key, payload, created_at, state, updated_at)
SELECT 'bench.order.created',
       ${KEY_SQL:-CASE WHEN i % 10 = 0 THEN NULL ELSE 'k' || ((i - i / 10) % 1000) END},
       jsonb_build_object('orderId', i, 'customerId', 'customer-' || (i % 5000),
           'status', 'created', 'currency', 'EUR', 'amountCents', (i * 7919) % 100000,
           'lineCount', 1 + i % 7, 'channel', 'web', 'note', repeat('x', 44)),
       clock_timestamp() - INTERVAL '$age', '$state', clock_timestamp() - INTERVAL '$age'
FROM generate_series($from::bigint, $to::bigint) AS g(i);
EOF
}

config() { # schema app receiver_port retention(yes|no)
    cat <<EOF
database:
  url: "$pg_url?sslmode=disable&application_name=$2&options=-c%20search_path%3D$1"
server:
  httpPort: 0
log:
  format: json
  level: info
outbox:
  batchSize: 100
EOF
    if [[ -n "$3" ]]; then
        cat <<EOF
destinations:
  receiver:
    type: http
    baseUrl: http://127.0.0.1:$3
    path: /events
routes:
  - topicPattern: "**"
    destination: receiver
EOF
    fi
    if [[ "$4" == yes ]]; then
        cat <<EOF
retention:
  enabled: true
  outbox:
    policy: AGE
    maxAge: 1d
EOF
    fi
}

new_schema() { # name
    psql_q -c "DROP SCHEMA IF EXISTS $1 CASCADE; CREATE SCHEMA $1" >/dev/null
    schemas+=("$1")
    config "$1" "$1" "" no >"$work/$1-migrate.yml"
    "$bin_dir/queuebox" migrate --config "$work/$1-migrate.yml" >"$work/$1-migrate.log" 2>&1
}

fill() { # schema pending [sent [age]]
    {
        echo "SET search_path = $1; BEGIN;"
        if [[ "${3:-0}" -gt 0 ]]; then fill_sql sent 1 "$3" "${4:-0 seconds}"; fi
        fill_sql pending "$(( ${3:-0} + 1 ))" "$(( ${3:-0} + $2 ))"
        echo "ANALYZE outbox; COMMIT;"
    } | psql_q >/dev/null
}

declare -A R
floor() { # phase pending [sent]
    local s="qb_scale_floor_$$"
    new_schema "$s"
    fill "$s" "$2" "${3:-0}"
    config "$s" "$s" "" no >"$work/$1-floor.yml"
    local l0 line
    l0="$(load)"
    line="$("$bin_dir/qb-sql-floor" --config "$work/$1-floor.yml")"
    R[$1.floor_load]="$l0 → $(load)"
    for kv in $line; do R[$1.floor_${kv%%=*}]="${kv#*=}"; done
    psql_q -c "DROP SCHEMA $s CASCADE" >/dev/null
}

drain() { # phase pending [sent [age retention]]
    local s="qb_scale_$$" pending="$2" sent_rows="${3:-0}" age="${4:-0 seconds}" keep="${5:-no}"
    new_schema "$s"
    "$bin_dir/qb-receiver" --out "$work/$1.csv" >"$work/$1.port" 2>"$work/$1.recv.log" &
    recv_pid=$!
    for _ in $(seq 100); do grep -q '^port=' "$work/$1.port" 2>/dev/null && break; sleep 0.1; done
    local port
    port="$(sed -n 's/^port=//p' "$work/$1.port")"
    config "$s" "$s" "$port" "$keep" >"$work/$1.yml"
    if [[ "$sent_rows" -gt 0 ]]; then
        # The sent rows are there before QueueBox starts (retention's first run is at the start).
        {
            echo "SET search_path = $s; BEGIN;"
            fill_sql sent 1 "$sent_rows" "$age"
            echo "ANALYZE outbox; COMMIT;"
        } | psql_q >/dev/null
    fi
    "$bin_dir/queuebox" run --config "$work/$1.yml" >"$work/$1.log" 2>&1 &
    qb_pid=$!
    for _ in $(seq 100); do grep -q 'QueueBox started' "$work/$1.log" && break; sleep 0.1; done
    local l0 cpu0 t0 t1="" t_clean=""
    l0="$(load)"
    cpu0="$(awk '{print $14 + $15}' "/proc/$qb_pid/stat")"
    local scans0
    scans0="$(psql_q -c "SELECT idx_scan FROM pg_stat_user_indexes WHERE schemaname = '$s' AND indexrelname = 'idx_outbox_pending'")"
    t0="$(date +%s.%N)"
    {
        echo "SET search_path = $s; BEGIN;"
        fill_sql pending "$(( sent_rows + 1 ))" "$(( sent_rows + pending ))"
        echo "ANALYZE outbox; COMMIT;"
    } | psql_q >/dev/null
    local t_fill
    t_fill="$(date +%s.%N)"
    # The polls must cost the database next to nothing: counting the sent rows ten times a
    # second read up to the whole table each time, a core's worth at 1,000,000 rows, beside the
    # drain it measured. So the receiver is asked how many deliveries it has seen, and only
    # then the table whether any row is still pending or processing (one index probe); the
    # old rows' deletion is probed every half second.
    local polls=0
    while :; do
        if [[ -z "$t1" ]] && [[ "$(curl -s "http://127.0.0.1:$port/count")" -ge "$pending" ]] \
            && [[ "$(psql_q -c "SELECT EXISTS (SELECT 1 FROM $s.outbox WHERE state IN ('pending', 'processing'))")" == f ]]; then
            t1="$(date +%s.%N)"
        fi
        if [[ "$keep" == yes && -z "$t_clean" && $(( polls % 5 )) -eq 0 ]] \
            && [[ "$(psql_q -c "SELECT EXISTS (SELECT 1 FROM $s.outbox WHERE state = 'sent' AND updated_at < now() - INTERVAL '1 day')")" == f ]]; then
            t_clean="$(date +%s.%N)"
        fi
        if [[ -n "$t1" && ( "$keep" != yes || -n "$t_clean" ) ]]; then break; fi
        polls=$(( polls + 1 ))
        sleep 0.1
    done
    R[$1.cpu_s]="$(awk -v a="$cpu0" -v b="$(awk '{print $14 + $15}' "/proc/$qb_pid/stat")" 'BEGIN { printf "%.2f", (b - a) / 100 }')"
    R[$1.db_cpu_s]="$(psql_q -c "SELECT pid FROM pg_stat_activity WHERE application_name = '$s'" \
        | while read -r pid; do awk '{print $14 + $15}' "/proc/$pid/stat" 2>/dev/null; done \
        | awk '{s += $1} END {printf "%.2f", s / 100}')"
    R[$1.load]="$l0 → $(load)"
    kill -TERM "$qb_pid"; wait "$qb_pid" || true; qb_pid=""
    # A backend reports its index scans to the statistics when it has been idle a while (up to
    # 10 s after its last statement) or when it exits, so the claims are counted once QueueBox's
    # sessions have closed (read before, a short phase counted none).
    for _ in $(seq 50); do
        [[ "$(psql_q -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = '$s'")" == 0 ]] && break
        sleep 0.1
    done
    R[$1.claims]="$(( $(psql_q -c "SELECT idx_scan FROM pg_stat_user_indexes WHERE schemaname = '$s' AND indexrelname = 'idx_outbox_pending'") - scans0 ))"
    kill -TERM "$recv_pid"; wait "$recv_pid" || true; recv_pid=""
    R[$1.rows]="$pending"
    R[$1.fill_s]="$(awk -v a="$t0" -v b="$t_fill" 'BEGIN { printf "%.2f", b - a }')"
    R[$1.seconds]="$(awk -v a="$t_fill" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')"
    [[ -n "$t_clean" ]] && R[$1.clean_s]="$(awk -v a="$t0" -v b="$t_clean" 'BEGIN { printf "%.1f", b - a }')"
    # The longest gap between two deliveries, and the deliveries received (a stall shows here).
    # The receipts file starts with a header line, which is not a delivery.
    R[$1.gap_ms]="$(tail -n +2 "$work/$1.csv" | cut -d, -f2 | sort -n | awk 'NR > 1 && $1 - p > g { g = $1 - p } { p = $1 } END { printf "%.1f", g / 1000 }')"
    R[$1.received]="$(( $(wc -l <"$work/$1.csv") - 1 ))"
    R[$1.warnings]="$(grep -c '"level":"\(WARN\|ERROR\)"' "$work/$1.log" || true)"
    # Deliveries out of the rows' order (orderId in the payload is not sent back, so the
    # receiver's message ids are matched to the table's sequence before the schema goes).
    psql_q -F, -c "SELECT id, sequence FROM $s.outbox" >"$work/$1.seq"
    R[$1.disorder]="$(awk -F, 'NR == FNR { seq[$1] = $2; next } FNR > 1 && !($1 in seen) { seen[$1] = 1; if (seq[$1] < last) bad++; last = seq[$1] } END { print bad + 0 }' "$work/$1.seq" <(sort -t, -k2,2n "$work/$1.csv"))"
    psql_q -c "DROP SCHEMA $s CASCADE" >/dev/null
}

uptime_before="$(uptime)"
rows_table=""
for n in $sizes; do
    say "pending-$n: floor"
    floor "p$n" "$n"
    say "pending-$n: QueueBox"
    drain "p$n" "$n"
done
say "sent-1M: floor ($behind pending behind $sent sent)"
floor sent "$behind" "$sent"
say "sent-1M: QueueBox"
drain sent "$behind" "$sent"
say "retention: QueueBox ($behind pending, $sent sent rows two days old, retention on)"
drain ret "$behind" "$sent" "2 days" yes
# The ceiling of one key: a row of a key goes out only after the previous row's `sent` is
# committed, and a commit waits for the WAL flush (synchronous_commit on). So one key moves at
# most one durable commit a row. Measured in this run: 2,000 one-row UPDATEs, each its own
# transaction, one after another, from psql on loopback (its client overhead included).
commit_floor() {
    local s="qb_scale_commit_$$" t0 t1
    psql_q -c "DROP SCHEMA IF EXISTS $s CASCADE; CREATE SCHEMA $s; CREATE TABLE $s.marks (id int PRIMARY KEY, state text NOT NULL); INSERT INTO $s.marks SELECT i, 'processing' FROM generate_series(1, 2000) AS g(i)" >/dev/null
    schemas+=("$s")
    t0="$(date +%s.%N)"
    for i in $(seq 2000); do echo "UPDATE $s.marks SET state = 'sent' WHERE id = $i;"; done | psql_q >/dev/null
    t1="$(date +%s.%N)"
    R[commit.per_s]="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", 2000 / (b - a) }')"
    R[commit.ms]="$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 2 }')"
    psql_q -c "DROP SCHEMA $s CASCADE" >/dev/null
}
if [[ "$hot" -gt 0 ]]; then
    say "hot-key: durable commits one after another"
    commit_floor
    say "hot-key: QueueBox ($hot pending rows of one key)"
    KEY_SQL="'hot'" drain hot "$hot"
fi
uptime_after="$(uptime)"

rate() { awk -v r="${R[$1.rows]}" -v s="${R[$1.seconds]}" 'BEGIN { printf "%d", r / s }'; }
frate() { awk -v r="${R[$1.floor_rows]}" -v s="${R[$1.floor_seconds]}" 'BEGIN { printf "%d", r / s }'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
num() { printf "%'d" "$1"; }
row() { # phase label
    echo "| $2 | **$(num "$(rate "$1")")** | $(num "$(frate "$1")") | **$(div "$(rate "$1")" "$(frate "$1")")** | ${R[$1.seconds]} s | ${R[$1.claims]} | ${R[$1.cpu_s]} s | ${R[$1.db_cpu_s]} s | ${R[$1.received]} | ${R[$1.gap_ms]} ms | ${R[$1.load]} |"
}
for n in $sizes; do rows_table+="$(row "p$n" "$(num "$n") pending")"$'\n'; done
rows_table+="$(row sent "$(num "$behind") pending behind $(num "$sent") \`sent\`")"
first="$(set -- $sizes; echo "$1")"
last="$(set -- $sizes; echo "${@: -1}")"
section="$(cat <<EOF
<!-- scaling-benchmark:begin: written by bench/scaling.sh; edits inside are overwritten -->
## Outbox: scaling with the backlog

Command: \`bench/scaling.sh\` (the phases are listed at the top of the script). Run $(date -u '+%Y-%m-%d %H:%M') UTC, commit \`$(git rev-parse --short HEAD)\`$(git diff --quiet HEAD -- crates bench || echo ' with uncommitted changes'); $(nproc) cores (\`uptime\` before: \`${uptime_before# }\`; after: \`${uptime_after# }\`). PostgreSQL and QueueBox as in the drain above: the release build at its defaults with \`outbox.batchSize\` 100, one \`http\` destination to \`qb-receiver\`. Each floor is \`qb-sql-floor\` (claim + mark, no delivery) on a fresh copy of the same rows, just before the drain.

| backlog | QueueBox msgs/s | SQL floor rows/s | ratio | drain time | claim statements | QueueBox CPU | its database backends' CPU | delivered | longest gap between deliveries | load before → after |
|---|---|---|---|---|---|---|---|---|---|---|
$rows_table

- At $(num "$last") pending rows QueueBox drained **$(div "$(rate "p$last")" "$(rate "p$first")")** × its rate at $(num "$first") (the floor: $(div "$(frate "p$last")" "$(frate "p$first")") ×), and $(div "$(rate "p$last")" "$(rate sent)") × its rate with $(num "$behind") pending behind $(num "$sent") \`sent\` rows.
$(if [[ "$hot" -gt 0 ]]; then echo "- **One hot key:** $(num "$hot") pending rows of the one key \`hot\`, drained at **$(num "$(rate hot)") msgs/s** (aim ≥ 1,000), beside **$(num "${R[commit.per_s]}") durable commits/s** one after another in the same run (${R[commit.ms]} ms each; one key moves at most one a row): **$(div "$(rate hot)" "${R[commit.per_s]}")** of that ceiling; in ${R[hot.seconds]} s with ${R[hot.claims]} claim statements; ${R[hot.received]} deliveries, ${R[hot.disorder]} out of the key's order; QueueBox CPU ${R[hot.cpu_s]} s, its backends' ${R[hot.db_cpu_s]} s; load ${R[hot.load]}."; fi)
- **Retention while draining:** the same $(num "$behind") pending rows behind $(num "$sent") \`sent\` rows two days old, with \`retention.outbox\` \`AGE\`, \`maxAge: 1d\` (batches of 1,000): the drain ran at **$(num "$(rate ret)") msgs/s** ($(div "$(rate ret)" "$(rate sent)") × the run without retention), the longest gap between two deliveries was **${R[ret.gap_ms]} ms** (without retention: ${R[sent.gap_ms]} ms), and every old row was deleted ${R[ret.clean_s]} s after the fill began; ${R[ret.received]} deliveries, ${R[ret.warnings]} warnings or errors logged; QueueBox CPU ${R[ret.cpu_s]} s, its backends' ${R[ret.db_cpu_s]} s; load ${R[ret.load]}.
<!-- scaling-benchmark:end -->
EOF
)"
echo "$section"
python3 - "$out" "$section" <<'EOF'
import sys
path, section = sys.argv[1], sys.argv[2]
begin = "<!-- scaling-benchmark:begin"
end = "<!-- scaling-benchmark:end -->"
try:
    page = open(path).read()
except FileNotFoundError:
    page = ""
if begin in page and end in page:
    b = page.index(begin); e = page.index(end) + len(end)
    page = page[:b] + section + page[e:]
else:
    page = page.rstrip("\n") + "\n\n" + section + "\n"
open(path, "w").write(page)
EOF
say "wrote the scaling section of $out"
