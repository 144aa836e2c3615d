#!/usr/bin/env bash
# The batch-handler pull benchmark (docs/benchmarks.md, "Pull: the batch handler"): 10,000 pull
# rows drained by the TypeScript and Go clients' opt-in batch handler (one no-op handler call,
# one transaction and one completion statement per claim of N rows), beside the same clients'
# per-message handler, pg-boss's batched `fetch` + `complete` loop and graphile-worker's pool
# (its defaults, and its batching: a local queue of N jobs and batched completions), same
# database, same run.
#
#   bench/pull-batch.sh                                # the documented run, a few minutes
#   bench/pull-batch.sh --rows 2000 --out /tmp/pb.md   # a quick try elsewhere
#
# Options: --rows N (10000), --batch N (100: N, the batch handler's batch and every phase's
# batchSize), --concurrency "1 8" (the levels: batch workers in one process for the batch handler,
# maxConcurrency for the per-message handler, fetch loops for pg-boss), --poll-ms N (100),
# --out FILE (docs/benchmarks.md), --keep (keep the work directory).
#
# The Rust client is not in it: its numbers need a release build, which bench/pull.sh makes.
# Needs what bench/pull.sh needs, except cargo: the local PostgreSQL, psql, Debian's Go with
# golang-github-jackc-pgx-v4-dev, Node 20+ with npm. Each phase runs in a fresh schema
# qb_pullb_<pid>_<phase>; rows, timing (database clock: min(claimed_at) -> max(processed_at);
# pg-boss: min(started_on) -> max(completed_on); graphile-worker, which deletes a job when it
# completes: its driver's wall clock from the first job's start to no job left) and the insert are
# those of bench/pull.sh.
# The section between the pull-batch-benchmark markers of the page is rewritten (appended when
# missing). Not part of scripts/test.sh: benchmarks are never timed tests.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
pg_url="${QUEUEBOX_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
rows=10000
batch=100
levels="1 8"
poll_ms=100
out="$root/docs/benchmarks.md"
keep=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rows) rows="$2"; shift 2 ;;
        --batch) batch="$2"; shift 2 ;;
        --concurrency) levels="$2"; shift 2 ;;
        --poll-ms) poll_ms="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --keep) keep=1; shift ;;
        *) echo "pull-batch.sh: unknown option $1" >&2; exit 2 ;;
    esac
done

work="$(mktemp -d "${TMPDIR:-/tmp}/qb-pullb.XXXXXX")"
prefix="qb_pullb_$$"
worker_pid=""
ok=0
log() { echo "pull-batch.sh: $*" >&2; }
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
    if [[ $ok -eq 1 && $keep -eq 0 ]]; then rm -rf "$work"; else log "work directory kept: $work"; fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# --- build (as bench/pull.sh) ------------------------------------------------------------------
if ! command -v go >/dev/null || [[ ! -d /usr/share/gocode/src/github.com/jackc/pgx/v4/stdlib ]]; then
    if [[ $(id -u) -eq 0 ]]; then
        log "installing golang-go and golang-github-jackc-pgx-v4-dev"
        apt-get update -qq >/dev/null && apt-get install -y -qq golang-go golang-github-jackc-pgx-v4-dev >/dev/null
    fi
fi
command -v go >/dev/null && [[ -d /usr/share/gocode/src/github.com/jackc/pgx/v4/stdlib ]] \
    || die "go or golang-github-jackc-pgx-v4-dev is missing (apt-get install golang-go golang-github-jackc-pgx-v4-dev)"
log "building bench/pull-go (GOPATH mode, offline)"
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
(cd clients/typescript && npm ci --no-audit --no-fund --prefer-offline --loglevel=error && npm run build) \
    >"$work/ts-build.log" 2>&1 || die "the TypeScript client did not build: $(tail -5 "$work/ts-build.log")"
log "installing pg-boss and graphile-worker (bench/pull-node)"
(cd bench/pull-node && npm ci --no-audit --no-fund --prefer-offline --loglevel=error >"$work/npm.log" 2>&1) \
    || die "npm ci failed in bench/pull-node: $(tail -5 "$work/npm.log")"
boss_version="$(node -p "require('./bench/pull-node/node_modules/pg-boss/package.json').version")"
graphile_version="$(node -p "require('./bench/pull-node/node_modules/graphile-worker/package.json').version")"

# shellcheck source=bench/facts.sh
source "$root/bench/facts.sh"
uptime_before="$(uptime)"
log "uptime before: $uptime_before"

# --- helpers (as bench/pull.sh) ----------------------------------------------------------------
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
clk_tck="$(getconf CLK_TCK)"
with_path() {
    local sep='?'
    [[ "$1" == *\?* ]] && sep='&'
    printf '%s%soptions=-c%%20search_path%%3D%s&sslmode=disable' "$1" "$sep" "$2"
}
start_worker() { # name, command...
    local name="$1" i; shift
    "$@" >"$work/$name.out" 2>"$work/$name.out.err" &
    worker_pid=$!
    for ((i = 0; i < 600; i++)); do
        grep -qx ready "$work/$name.out" 2>/dev/null && { sleep 2; return 0; }
        kill -0 "$worker_pid" 2>/dev/null || die "the $name worker exited: $(tail -5 "$work/$name.out.err")"
        sleep 0.05
    done
    die "the $name worker was not ready within 30 s"
}
poll_done() { # count query
    local n deadline=$(( $(date +%s) + 900 ))
    while :; do
        n="$(q -c "$1")"
        [[ "$n" -ge "$rows" ]] && break
        kill -0 "$worker_pid" 2>/dev/null || die "the worker died at $n of $rows rows: $(tail -5 "$work/$phase.out.err")"
        [[ $(date +%s) -lt $deadline ]] || die "timeout at $n of $rows rows"
        sleep 0.1
    done
}
stop_worker() {
    cpu_s="$(awk -v t="$(cpu_ticks "$worker_pid")" -v h="$clk_tck" 'BEGIN { printf "%.2f", t / h }')"
    kill -TERM "$worker_pid"
    local status=0
    wait "$worker_pid" || status=$?
    worker_pid=""
    [[ $status -eq 0 || $status -eq 143 ]] || die "the $phase worker exited with $status: $(tail -5 "$work/$phase.out.err")"
}
record() { # label, concurrency
    printf '%s|%s|%s|%s|%s|%s|%s|%s\n' "$1" "$2" "$ms" "$done" "$other" "$cpu_s" "$load_before" \
        "$(cut -d' ' -f1-3 /proc/loadavg)" >>"$work/results"
    log "$1 c$2: $done rows in $ms ms (first claim -> last completion)"
}

# A QueueBox phase: $1 = ts|go, $2 = batch|message, $3 = concurrency.
run_qb() {
    local client="$1" mode="$2" c="$3"
    phase="${client}_${mode}_c$c"
    local schema="${prefix}_$phase" url
    sed -e "s/{schema}/$schema/g" -e 's/{\([a-z_][a-z_]*\)}/\1/g' clients/contract/fixtures/postgresql.sql | q >/dev/null
    url="$(with_path "$pg_url" "$schema")"
    load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
    case "$client" in
        go) start_worker "$phase" "$go_bin" -url "$url" -batch "$batch" -concurrency "$c" -poll-ms "$poll_ms" -handler "$mode" ;;
        ts) start_worker "$phase" node bench/pull-node/ts-worker.mjs "$url" bench "$batch" "$c" "$poll_ms" "$mode" ;;
    esac
    q -c "SET search_path TO $schema; BEGIN;
        INSERT INTO inbox (source, idempotency_key, aggregate_id, event_type, payload, consumption)
        SELECT 'bench', 'k' || i, 'a' || i, 'bench.pulled',
               jsonb_build_object('id', i, 'kind', 'bench.pulled', 'note', repeat('x', 150)), 'pull'
          FROM generate_series(1, $rows) AS i;
        ANALYZE inbox;
        COMMIT;" >/dev/null
    poll_done "SELECT count(*) FROM $schema.inbox WHERE state = 'processed'"
    stop_worker
    IFS='|' read -r ms done other < <(q -F'|' -c "SELECT
        round(extract(epoch FROM max(processed_at) - min(claimed_at)) * 1000, 1),
        count(*) FILTER (WHERE state = 'processed'),
        count(*) FILTER (WHERE state <> 'processed' OR attempt <> 0)
        FROM $schema.inbox")
    record "${client}_$mode" "$c"
}

# pg-boss's batched completion: fetch(batchSize) then complete(ids), $1 loops.
run_boss_loop() {
    local c="$1"
    phase="pgboss_loop_c$c"
    local schema="${prefix}_$phase"
    node bench/pull-node/pgboss.mjs init "$pg_url" "$schema" bench >/dev/null 2>"$work/$phase.init.err" \
        || die "pg-boss init failed: $(tail -5 "$work/$phase.init.err")"
    load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
    start_worker "$phase" node bench/pull-node/pgboss.mjs loop "$pg_url" "$schema" bench "$batch" "$c"
    node bench/pull-node/pgboss.mjs insert "$pg_url" "$schema" bench "$rows" >/dev/null 2>"$work/$phase.insert.err" \
        || die "pg-boss insert failed: $(tail -5 "$work/$phase.insert.err")"
    q -c "ANALYZE $schema.job" >/dev/null
    poll_done "SELECT count(*) FROM $schema.job WHERE name = 'bench' AND state = 'completed'"
    stop_worker
    IFS='|' read -r ms done other < <(q -F'|' -c "SELECT
        round(extract(epoch FROM max(completed_on) - min(started_on)) * 1000, 1),
        count(*) FILTER (WHERE state = 'completed'),
        count(*) FILTER (WHERE state <> 'completed' OR retry_count <> 0)
        FROM $schema.job WHERE name = 'bench'")
    record pgboss_loop "$c"
}

# graphile-worker's pool, $1 = concurrency (concurrentJobs), $2 = defaults | batched (a local
# queue of $batch jobs, completeJobBatchDelay 0). Its driver prints ms= once every job ran and
# none is left.
run_graphile() {
    local c="$1" flavour="$2"
    phase="graphile_${flavour}_c$c"
    local schema="${prefix}_$phase" deadline
    node bench/pull-node/graphile.mjs init "$pg_url" "$schema" >/dev/null 2>"$work/$phase.init.err" \
        || die "graphile-worker init failed: $(tail -5 "$work/$phase.init.err")"
    load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
    start_worker "$phase" node bench/pull-node/graphile.mjs run "$pg_url" "$schema" "$c" "$batch" "$flavour" "$rows"
    node bench/pull-node/graphile.mjs insert "$pg_url" "$schema" "$rows" >/dev/null 2>"$work/$phase.insert.err" \
        || die "graphile-worker insert failed: $(tail -5 "$work/$phase.insert.err")"
    deadline=$(( $(date +%s) + 900 ))
    until grep -q '^ms=' "$work/$phase.out"; do
        kill -0 "$worker_pid" 2>/dev/null || die "the $phase worker died: $(tail -5 "$work/$phase.out.err")"
        [[ $(date +%s) -lt $deadline ]] || die "timeout waiting for $phase"
        sleep 0.1
    done
    stop_worker
    ms="$(sed -n 's/^ms=//p' "$work/$phase.out")"
    done="$rows"
    other="$(q -c "SELECT count(*) FROM $schema._private_jobs")"
    record "graphile_$flavour" "$c"
}

# --- phases ----------------------------------------------------------------------------------
: >"$work/results"
for c in $levels; do
    run_qb ts batch "$c"
    run_qb go batch "$c"
    run_boss_loop "$c"
    run_graphile "$c" defaults
    run_graphile "$c" batched
    run_qb ts message "$c"
    run_qb go message "$c"
done
uptime_after="$(uptime)"
log "uptime after: $uptime_after"

# --- the page --------------------------------------------------------------------------------
section="$work/section.md"
{
    echo "<!-- pull-batch-benchmark:begin: written by bench/pull-batch.sh; edits inside are overwritten -->"
    echo "## Pull: the batch handler"
    echo
    echo "Command: \`bench/pull-batch.sh\` (what it does: the comment at its top)."
    echo
    echo "- Run: $date_run UTC, commit $commit; $cores cores ($cpu_model), $(printf '%.1f' "$mem_gb") GB memory; PostgreSQL on the same machine, as in the pull benchmark above. Other engineers build and test on these cores: \`uptime\` before: \`$uptime_before\`; after: \`$uptime_after\`."
    echo "- Rows: $rows pending pull rows, each of its own aggregate, a JSON payload of about 200 bytes, inserted in one transaction with \`ANALYZE\` (the rows and insert of \`bench/pull.sh\`)."
    echo "- **Batch handler**: \`createBatchWorker\` (TypeScript, Node $(node --version)) and \`inbox.NewBatchWorker\` (Go, $(go version | awk '{ print $3 }'), pgx v4) with a no-op handler and batch size $batch: per claim, one handler transaction and one \`complete-batch.sql\` statement. Concurrency c = c batch workers in one process. **Per message**: the same clients' \`createWorker\` / \`NewWorker\` (a transaction and a Complete per row), batch size $batch, \`maxConcurrency\` c. **pg-boss $boss_version \`fetch\` + \`complete\` loop**: c loops of \`fetch(batchSize: $batch)\` then \`complete(ids)\` (no handler transaction). **graphile-worker $graphile_version**: its pool with \`concurrentJobs\` c and a no-op task, with its defaults (a job fetched and completed at a time) and batched (\`localQueue.size\` $batch and \`completeJobBatchDelay\` 0: jobs fetched and locked $batch at a time, completions batched); no handler transaction either, and it deletes each job when it completes."
    echo "- rows/s = rows ÷ (last completion − first claim), database clock; graphile-worker keeps no completion time, so for it the driver's clock, from the first job's start to the first query that finds no job left (every completion committed; checked every 5 ms once every job ran). Poll interval $poll_ms ms; lease 30 s."
    echo
    echo "| | c | rows/s | ratio to pg-boss loop (same c) | ratio to graphile-worker batched (same c) | first claim → last completion | CPU time of the worker process | done / not done or retried | load average before → after |"
    echo "|---|---|---|---|---|---|---|---|---|"
    awk -F'|' -v rows="$rows" '
        { label[NR] = $1; c[NR] = $2; ms[NR] = $3; line[NR] = $0
          if ($1 == "pgboss_loop") peer[$2] = rows / ($3 / 1000)
          if ($1 == "graphile_batched") gpeer[$2] = rows / ($3 / 1000) }
        END {
            names["ts_batch"] = "TypeScript batch handler"; names["go_batch"] = "Go batch handler"
            names["ts_message"] = "TypeScript per message"; names["go_message"] = "Go per message"
            names["pgboss_loop"] = "pg-boss fetch + complete loop"
            names["graphile_defaults"] = "graphile-worker, defaults"; names["graphile_batched"] = "graphile-worker, batched"
            for (i = 1; i <= NR; i++) {
                split(line[i], f, "|"); r = rows / (f[3] / 1000)
                ratio = (f[2] in peer) ? sprintf("%.2f", r / peer[f[2]]) : "n/a"
                gratio = (f[2] in gpeer) ? sprintf("%.2f", r / gpeer[f[2]]) : "n/a"
                bold = (f[1] ~ /_batch$/) ? "**" : ""
                printf "| %s | %s | %s%.0f%s | %s | %s | %.2f s | %s s | %s / %s | %s → %s |\n", names[f[1]], f[2], \
                    bold, r, bold, ratio, gratio, f[3] / 1000, f[6], f[4], f[5], f[7], f[8]
            }
        }' "$work/results"
    echo
    echo "<!-- pull-batch-benchmark:end -->"
} >"$section"
if grep -q '^<!-- pull-batch-benchmark:begin' "$out" 2>/dev/null; then
    awk -v s="$section" '
        /^<!-- pull-batch-benchmark:begin/ { while ((getline l < s) > 0) print l; skip = 1; next }
        /^<!-- pull-batch-benchmark:end/ { skip = 0; next }
        !skip' "$out" >"$work/page" && cp "$work/page" "$out"
else
    { echo; cat "$section"; } >>"$out"
fi
log "wrote the pull-batch section of $out"
ok=1
