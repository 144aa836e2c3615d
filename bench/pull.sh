#!/usr/bin/env bash
# The pull benchmark (docs/benchmarks.md, "Pull: client libraries beside pg-boss"): 10,000 pull
# rows drained by each pull client with a no-op handler, beside pg-boss (npm, pinned in
# bench/pull-node/package.json) doing the same no-op work on the same database in the same run.
#
#   bench/pull.sh                                  # the documented run, about 5 minutes
#   bench/pull.sh --rows 2000 --out /tmp/pull.md   # a quick try elsewhere
#
# Options: --rows N (10000), --batch N (50), --concurrency "1 8" (the levels), --poll-ms N
# (100: the clients' poll interval; pg-boss's work() takes its minimum, 500), --out FILE
# (docs/benchmarks.md), --keep (keep the work directory), --no-wait (do not wait for other
# benchmarks: qb-bench, wrk, pgbench).
#
# Needs the local PostgreSQL of the tests (postgres://postgres@127.0.0.1:5432/test, trust;
# QUEUEBOX_BENCH_PG_URL for another), psql, cargo, Debian's Go with golang-github-jackc-pgx-v4-dev
# (installed with apt-get when missing and run as root, like clients/go/test.sh) and Node 20+ with
# npm. It builds everything first:
#   - qb-pull-rust (bench/queuebox-bench, queuebox-inbox with the `postgres` feature), release;
#   - bench/pull-go (the Go client, GOPATH mode offline, like clients/go/test.sh);
#   - the TypeScript client (`npm ci` and `npm run build` in clients/typescript; when that fails, the
#     TypeScript rows say "not measured");
#   - `npm ci` in bench/pull-node (pg-boss; node_modules is git-ignored).
# Then it waits until no other benchmark runs (pgrep -f 'qb-bench|wrk|pgbench'), and for each
# concurrency level runs these phases, each in a fresh schema qb_pull_<pid>_<phase>:
#   pgboss_work, rust, go, ts, pgboss_loop, row_floor
# A QueueBox phase creates the inbox table from clients/contract/fixtures/postgresql.sql, starts
# the worker on the empty table, reads its idle RSS (VmRSS) 2 s after it printed "ready", then
# inserts the rows in one transaction with ANALYZE inbox (autovacuum is off on the test server),
# polls the processed count every 100 ms until every row is processed, reads the peak RSS (VmHWM)
# and CPU time, and stops the worker with SIGTERM. A pg-boss phase does the same with pg-boss's
# own schema, queue and boss.insert (one statement), then ANALYZE of its job table. The
# row_floor phase inserts the same rows already claimed (state processing, one token, a 1 h
# lease) and runs qb-pull-floor: BEGIN, the contract's complete statement, COMMIT for each row,
# on `concurrency` connections, no claim: what one transaction per row costs on this machine.
# Rows/s = rows / (the last completion - the first claim), both read from the database clock
# (QueueBox: claimed_at, processed_at; pg-boss: started_on, completed_on).
# The section between the pull-benchmark markers of the page is rewritten (appended when
# missing); the rest of the page is left alone. A failed run writes nothing to the page, keeps
# its work directory, and drops its schemas.
#
# Not part of scripts/test.sh: benchmarks are never timed tests.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
pg_url="${QUEUEBOX_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
target="${CARGO_TARGET_DIR:-$root/target}"
rows=10000
batch=50
levels="1 8"
poll_ms=100
boss_poll_ms=500
out="$root/docs/benchmarks.md"
keep=0
wait_others=1
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rows) rows="$2"; shift 2 ;;
        --batch) batch="$2"; shift 2 ;;
        --concurrency) levels="$2"; shift 2 ;;
        --poll-ms) poll_ms="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --keep) keep=1; shift ;;
        --no-wait) wait_others=0; shift ;;
        *) echo "pull.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

work="$(mktemp -d "${TMPDIR:-/tmp}/qb-pull.XXXXXX")"
prefix="qb_pull_$$"
worker_pid=""
ok=0
log() { echo "pull.sh: $*" >&2; }
die() { log "$*"; exit 1; }
q() { psql "$pg_url" -qAtX -v ON_ERROR_STOP=1 "$@"; }

cleanup() {
    status=$?
    if [[ -n "$worker_pid" ]] && kill -0 "$worker_pid" 2>/dev/null; then
        kill -TERM "$worker_pid" 2>/dev/null || true
        sleep 1
        kill -KILL "$worker_pid" 2>/dev/null || true
    fi
    q -c "SELECT format('DROP SCHEMA IF EXISTS %I CASCADE', nspname)
          FROM pg_namespace WHERE nspname LIKE '${prefix}\_%'" 2>/dev/null | q >/dev/null 2>&1 || true
    if [[ $ok -eq 1 && $keep -eq 0 ]]; then
        rm -rf "$work"
    else
        log "work directory kept: $work"
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build -----------------------------------------------------------------------------------
log "building qb-pull-rust"
cargo build --release --quiet -p queuebox-bench --bin qb-pull-rust --bin qb-pull-floor
rust_bin="$target/release/qb-pull-rust"
floor_bin="$target/release/qb-pull-floor"

log "building bench/pull-go (GOPATH mode, offline)"
# The same Debian packages clients/go/test.sh installs, installed the same way when missing.
if ! command -v go >/dev/null || [[ ! -d /usr/share/gocode/src/github.com/jackc/pgx/v4/stdlib ]]; then
    if [[ $(id -u) -eq 0 ]]; then
        log "installing golang-go and golang-github-jackc-pgx-v4-dev"
        apt-get update -qq >/dev/null && apt-get install -y -qq golang-go golang-github-jackc-pgx-v4-dev >/dev/null
    fi
fi
command -v go >/dev/null && [[ -d /usr/share/gocode/src/github.com/jackc/pgx/v4/stdlib ]] \
    || die "go or golang-github-jackc-pgx-v4-dev is missing (apt-get install golang-go golang-github-jackc-pgx-v4-dev)"
gopath="$work/gopath"
mkdir -p "$gopath/src/github.com/alternayte"
ln -s "$root" "$gopath/src/github.com/alternayte/queuebox"
(
    export GO111MODULE=off GOPATH="$gopath:/usr/share/gocode" GOFLAGS= GOPROXY=off
    export GOCACHE="${GOCACHE:-${XDG_CACHE_HOME:-${HOME:-/tmp}/.cache}/go-build}"
    cd "$gopath/src/github.com/alternayte/queuebox/bench/pull-go"
    go build -o "$work/pull-go" .
)
go_bin="$work/pull-go"

log "building the TypeScript client"
ts_ok=1
if ! (cd clients/typescript && npm ci --no-audit --no-fund --prefer-offline --loglevel=error \
        && npm run build) >"$work/ts-build.log" 2>&1; then
    ts_ok=0
    log "npm ci or npm run build failed in clients/typescript: the TypeScript client is not measured"
fi

log "installing pg-boss (bench/pull-node)"
(cd bench/pull-node && npm ci --no-audit --no-fund --loglevel=error >"$work/npm.log" 2>&1) \
    || die "npm ci failed in bench/pull-node: $(tail -5 "$work/npm.log")"
boss_version="$(node -p "require('./bench/pull-node/node_modules/pg-boss/package.json').version")"

# --- wait for the machine ----------------------------------------------------------------------
if [[ $wait_others -eq 1 ]]; then
    waited=0
    while pgrep -f 'qb-bench|wrk|pgbench' >/dev/null; do
        [[ $waited -eq 0 ]] && log "another benchmark runs ($(pgrep -af 'qb-bench|wrk|pgbench' | head -3 | tr '\n' ';')); waiting"
        waited=$((waited + 5))
        sleep 5
    done
    [[ $waited -gt 0 ]] && log "waited ${waited} s for other benchmarks"
fi

# --- facts -----------------------------------------------------------------------------------
# shellcheck source=bench/facts.sh
source "$root/bench/facts.sh"
pg_facts="$(q -F'|' -c "SELECT current_setting('server_version'),
    current_setting('shared_buffers'), current_setting('synchronous_commit'),
    current_setting('fsync'), current_setting('autovacuum'), current_setting('max_connections')")"
node_version="$(node --version)"
go_version="$(go version | awk '{ print $3 }')"
uptime_before="$(uptime)"
log "uptime before: $uptime_before"

# --- helpers ---------------------------------------------------------------------------------
status_kb() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status"; }
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
clk_tck="$(getconf CLK_TCK)"
now_ms() { date +%s%3N; }

with_path() { # url, schema -> url whose connections use that search_path
    local sep='?'
    [[ "$1" == *\?* ]] && sep='&'
    printf '%s%soptions=-c%%20search_path%%3D%s&sslmode=disable' "$1" "$sep" "$2"
}

wait_ready() { # pid, stdout file
    local i
    for ((i = 0; i < 600; i++)); do
        grep -qx ready "$2" 2>/dev/null && return 0
        kill -0 "$1" 2>/dev/null || die "the worker exited before it was ready: $(tail -5 "$2" "$2.err")"
        sleep 0.05
    done
    die "the worker was not ready within 30 s"
}

# Starts "$@" as the worker; waits for "ready" and 2 s; sets worker_pid, idle_kb, cpu0.
start_worker() {
    local name="$1"; shift
    "$@" >"$work/$name.out" 2>"$work/$name.out.err" &
    worker_pid=$!
    wait_ready "$worker_pid" "$work/$name.out"
    sleep 2
    idle_kb="$(status_kb "$worker_pid" VmRSS)"
}

# Polls "$1" (a count query) until it returns $rows; sets wall_ms (since $t0).
poll_done() {
    local n=0 deadline=$(( $(now_ms) + 900000 ))
    while :; do
        n="$(q -c "$1")"
        [[ "$n" -ge "$rows" ]] && break
        kill -0 "$worker_pid" 2>/dev/null || die "the worker died at $n of $rows rows: $(tail -5 "$work/$phase.out.err")"
        [[ $(now_ms) -lt $deadline ]] || die "timeout at $n of $rows rows"
        sleep 0.1
    done
    wall_ms=$(( $(now_ms) - t0 ))
}

stop_worker() {
    peak_kb="$(status_kb "$worker_pid" VmHWM)"
    cpu_s="$(awk -v t="$(cpu_ticks "$worker_pid")" -v h="$clk_tck" 'BEGIN { printf "%.2f", t / h }')"
    kill -TERM "$worker_pid"
    local status=0
    wait "$worker_pid" || status=$?
    worker_pid=""
    [[ $status -eq 0 || $status -eq 143 ]] || die "the $phase worker exited with $status: $(tail -5 "$work/$phase.out.err")"
}

emit() { # client, concurrency, then key=value pairs from the phase
    printf '{"client":"%s","concurrency":%s,"seconds":%s,"first_to_last_ms":%s,"wall_ms":%s,"idle_kb":%s,"peak_kb":%s,"cpu_s":%s,"done":%s,"other":%s,"claims":"%s","load_before":"%s","load_after":"%s"}\n' \
        "$1" "$2" "$seconds" "$first_to_last_ms" "$wall_ms" "$idle_kb" "$peak_kb" "$cpu_s" "$done" "$other" "$claims" "$load_before" "$(cut -d' ' -f1-3 /proc/loadavg)" \
        >>"$work/results.jsonl"
}

# A QueueBox client phase: $1 = client name (rust|go|ts), $2 = concurrency.
run_qb() {
    local client="$1" c="$2"
    phase="${client}_c$c"
    local schema="${prefix}_$phase"
    sed -e "s/{schema}/$schema/g" -e 's/{\([a-z_][a-z_]*\)}/\1/g' clients/contract/fixtures/postgresql.sql | q >/dev/null
    local url
    url="$(with_path "$pg_url" "$schema")"
    load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
    case "$client" in
        rust) start_worker "$phase" "$rust_bin" --url "$url" --batch "$batch" --concurrency "$c" --poll-ms "$poll_ms" ;;
        go) start_worker "$phase" "$go_bin" -url "$url" -batch "$batch" -concurrency "$c" -poll-ms "$poll_ms" ;;
        ts) start_worker "$phase" node bench/pull-node/ts-worker.mjs "$url" bench "$batch" "$c" "$poll_ms" ;;
    esac
    t0="$(now_ms)"
    q -c "SET search_path TO $schema; BEGIN;
        INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, consumption)
        SELECT 'bench', 'k' || i, 'a' || i, 'bench.pulled',
               jsonb_build_object('id', i, 'kind', 'bench.pulled', 'note', repeat('x', 150)), 'pull'
          FROM generate_series(1, $rows) AS i;
        ANALYZE inbox;
        COMMIT;" >/dev/null
    poll_done "SELECT count(*) FROM $schema.inbox WHERE state = 'processed'"
    stop_worker
    sleep 1.2 # the statistics collector flushes at most once a second
    IFS='|' read -r first_to_last_ms done other claims < <(q -F'|' -c "SELECT
        round(extract(epoch FROM max(processed_at) - min(claimed_at)) * 1000, 3),
        count(*) FILTER (WHERE state = 'processed'),
        count(*) FILTER (WHERE state <> 'processed' OR attempt <> 0),
        (SELECT idx_scan FROM pg_stat_user_indexes
          WHERE schemaname = '$schema' AND indexrelname = 'idx_inbox_pull_pending')
        FROM $schema.inbox")
    seconds="$(awk -v m="$first_to_last_ms" 'BEGIN { printf "%.3f", m / 1000 }')"
    emit "$client" "$c"
    log "$phase: $rows rows in $seconds s (first claim -> last completion), wall ${wall_ms} ms"
}

# A pg-boss phase: $1 = work|loop, $2 = concurrency (workers).
run_boss() {
    local mode="$1" c="$2"
    phase="pgboss_${mode}_c$c"
    local schema="${prefix}_$phase"
    local url="$pg_url"
    node bench/pull-node/pgboss.mjs init "$url" "$schema" bench >/dev/null 2>"$work/$phase.init.err" \
        || die "pg-boss init failed: $(tail -5 "$work/$phase.init.err")"
    load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
    if [[ "$mode" == work ]]; then
        start_worker "$phase" node bench/pull-node/pgboss.mjs work "$url" "$schema" bench "$batch" "$c" "$boss_poll_ms"
    else
        start_worker "$phase" node bench/pull-node/pgboss.mjs loop "$url" "$schema" bench "$batch" "$c"
    fi
    t0="$(now_ms)"
    node bench/pull-node/pgboss.mjs insert "$url" "$schema" bench "$rows" >/dev/null 2>"$work/$phase.insert.err" \
        || die "pg-boss insert failed: $(tail -5 "$work/$phase.insert.err")"
    q -c "ANALYZE $schema.job" >/dev/null
    poll_done "SELECT count(*) FROM $schema.job WHERE name = 'bench' AND state = 'completed'"
    stop_worker
    sleep 1.2
    IFS='|' read -r first_to_last_ms done other claims < <(q -F'|' -c "SELECT
        round(extract(epoch FROM max(completed_on) - min(started_on)) * 1000, 3),
        count(*) FILTER (WHERE state = 'completed'),
        count(*) FILTER (WHERE state <> 'completed' OR retry_count <> 0),
        ''
        FROM $schema.job WHERE name = 'bench'")
    seconds="$(awk -v m="$first_to_last_ms" 'BEGIN { printf "%.3f", m / 1000 }')"
    emit "pgboss_$mode" "$c"
    log "$phase: $rows rows in $seconds s (first fetch -> last completion), wall ${wall_ms} ms"
}

# The per-row transaction floor: $1 = concurrency (connections).
run_floor() {
    local c="$1"
    phase="row_floor_c$c"
    local schema="${prefix}_$phase" token
    token="$(cat /proc/sys/kernel/random/uuid)"
    sed -e "s/{schema}/$schema/g" -e 's/{\([a-z_][a-z_]*\)}/\1/g' clients/contract/fixtures/postgresql.sql | q >/dev/null
    q -c "SET search_path TO $schema; BEGIN;
        INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, consumption,
                           state, claim_token, claimed_at, lease_expires_at)
        SELECT 'bench', 'k' || i, 'a' || i, 'bench.pulled',
               jsonb_build_object('id', i, 'kind', 'bench.pulled', 'note', repeat('x', 150)), 'pull',
               'processing', '$token', clock_timestamp(), clock_timestamp() + INTERVAL '1 hour'
          FROM generate_series(1, $rows) AS i;
        ANALYZE inbox;
        COMMIT;" >/dev/null
    load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
    local url out
    url="$(with_path "$pg_url" "$schema")"
    out="$("$floor_bin" --url "$url" --token "$token" --concurrency "$c")" \
        || die "qb-pull-floor failed at concurrency $c"
    seconds="$(sed -nE 's/.*seconds=([0-9.]+).*/\1/p' <<<"$out")"
    first_to_last_ms="$(awk -v s="$seconds" 'BEGIN { printf "%.3f", s * 1000 }')"
    wall_ms="${first_to_last_ms%.*}"
    idle_kb=0 peak_kb=0 cpu_s=0 claims=''
    IFS='|' read -r done other < <(q -F'|' -c "SELECT
        count(*) FILTER (WHERE state = 'processed'), count(*) FILTER (WHERE state <> 'processed')
        FROM $schema.inbox")
    [[ "$done" -eq "$rows" ]] || die "qb-pull-floor marked $done of $rows rows"
    emit row_floor "$c"
    log "$phase: $rows rows in $seconds s (one transaction per row, no claim)"
}

# --- phases ----------------------------------------------------------------------------------
: >"$work/results.jsonl"
for c in $levels; do
    run_boss work "$c"
    run_qb rust "$c"
    run_qb go "$c"
    if [[ $ts_ok -eq 1 ]]; then run_qb ts "$c"; fi
    run_boss loop "$c"
    run_floor "$c"
done

uptime_after="$(uptime)"
log "uptime after: $uptime_after"

# --- the page --------------------------------------------------------------------------------
node bench/pull-node/render.mjs "$work/results.jsonl" "$out" \
    "date_run=$date_run" "commit=$commit" "cores=$cores" "cpu_model=$cpu_model" "mem_gb=$mem_gb" \
    "pg_facts=$pg_facts" "node_version=$node_version" "go_version=$go_version" \
    "boss_version=$boss_version" "rows=$rows" "batch=$batch" "poll_ms=$poll_ms" \
    "boss_poll_ms=$boss_poll_ms" "ts_ok=$ts_ok" "uptime_before=$uptime_before" \
    "uptime_after=$uptime_after"
log "wrote the pull section of $out"
ok=1
