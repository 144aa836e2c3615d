#!/usr/bin/env bash
# The inbox benchmarks (docs/benchmarks.md, "Inbox intake" and "Inbox relay"): builds the release
# `queuebox` and the bench binaries, then, against the local PostgreSQL
# (postgres://postgres@127.0.0.1:5432/test), in this order, each phase in a fresh schema:
#
#   1. intake floor:  pgbench, single-row INSERT ... ON CONFLICT DO NOTHING transactions
#   2. intake:        wrk posting unique webhooks to a running QueueBox (a pull http source)
#   3. intake floor again
#   4. relay floor:   qb-relay-floor (the store's relay_claim + relay_forward, no QueueBox)
#   5. relay:         a running QueueBox relaying the same push rows into the outbox
#   6. relay floor again
#
# and rewrites the two inbox sections of docs/benchmarks.md (nothing else on the page).
#
#   bench/inbox.sh                                    # the documented run, about 6 minutes
#   bench/inbox.sh --seconds 5 --relay-rows 5000 --out /tmp/b.md   # a quick try
#
# Options: --seconds N (each intake phase, 20), --connections N (64), --threads N (2, wrk's
# threads and pgbench's -j), --relay-rows N (100000), --relay-batch N (100), --out FILE
# (docs/benchmarks.md), --keep (keep the work directory). QUEUEBOX_BENCH_PG_URL sets the server.
# Not part of scripts/test.sh: benchmarks are never timed tests.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$root/target}"
pg_url="${QUEUEBOX_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"

seconds=20 connections=64 threads=2 relay_rows=100000 relay_batch=100
out="docs/benchmarks.md" keep=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --seconds) seconds="$2"; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        --threads) threads="$2"; shift 2 ;;
        --relay-rows) relay_rows="$2"; shift 2 ;;
        --relay-batch) relay_batch="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --keep) keep=1; shift ;;
        -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
        *) echo "inbox.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

say() { echo "inbox.sh: $* (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2; }
die() { echo "inbox.sh: $*" >&2; exit 1; }

# --- tools -------------------------------------------------------------------------------------
apt_install() {
    if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
        say "installing $*"
        apt-get install -y -qq "$@" >/dev/null 2>&1 \
            || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "$@" >/dev/null 2>&1; }
    fi
}
scripts/services.sh wrk >/dev/null || die "wrk is missing and could not be installed (apt-get install -y wrk)"
pgbench="$(ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -1 || true)"
if [[ -z "$pgbench" ]]; then
    command -v pgbench >/dev/null || apt_install postgresql-client
    pgbench="$(ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -1 || true)"
    [[ -n "$pgbench" ]] || pgbench="$(command -v pgbench || true)"
fi
[[ -n "$pgbench" ]] || die "pgbench is missing (apt-get install -y postgresql-client)"
command -v psql >/dev/null || die "psql is missing (apt-get install -y postgresql-client)"

cargo build --release --quiet -p queuebox -p queuebox-bench
queuebox="$target/release/queuebox"
relay_floor="$target/release/qb-relay-floor"

# --- work directory, children, schemas; cleaned up however the run ends ------------------------
prefix="qb_bench_$$"
work="$(mktemp -d "${TMPDIR:-/tmp}/qb-inbox-bench-$$.XXXX")"
children=()
ok=0
cleanup() {
    status=$?
    trap - EXIT INT TERM
    for pid in "${children[@]}"; do
        if kill -0 "$pid" 2>/dev/null; then
            kill -TERM "$pid" 2>/dev/null || true
            for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            kill -KILL "$pid" 2>/dev/null || true
        fi
    done
    psql "$pg_url" -qAt -v ON_ERROR_STOP=0 -c "
        SELECT format('DROP SCHEMA IF EXISTS %I CASCADE', nspname)
        FROM pg_namespace WHERE nspname LIKE '${prefix//_/\\_}\\_%'" 2>/dev/null \
        | psql "$pg_url" -qAt 2>/dev/null >/dev/null || true
    if [[ $ok -eq 1 && $keep -eq 0 ]]; then
        rm -rf "$work"
    else
        echo "inbox.sh: logs and files kept in $work" >&2
    fi
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# psql in a schema: sq SCHEMA SQL...
sq() {
    local schema="$1"; shift
    PGOPTIONS="-c search_path=$schema" psql "$pg_url" -qAtX -v ON_ERROR_STOP=1 "$@"
}
qb_url() { echo "$pg_url?sslmode=disable&options=-c%20search_path%3D$1"; }

# Cut, never rounded up: int N; dec N DIGITS; thousands separators on the integer part.
int() { awk -v x="$1" 'BEGIN { s = sprintf("%d", int(x)); n = length(s); o = "";
    for (i = 1; i <= n; i++) { o = o substr(s, i, 1); if ((n - i) % 3 == 0 && i < n) o = o "," }
    print o }'; }
dec() { awk -v x="$1" -v d="$2" 'BEGIN { m = 10 ^ d; printf "%.*f\n", d, int(x * m) / m }'; }
calc() { awk "BEGIN { printf \"%.9f\n\", $1 }"; }
load() { cut -d' ' -f1-3 /proc/loadavg; }
rss_mb() { awk -v k="$2" '$1 == k":" { printf "%.9f\n", $2 * 1024 / 1e6 }' "/proc/$1/status"; }
cpu_s() { awk -v t="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f\n", ($12 + $13) / t }' "/proc/$1/stat"; }
complaints() { grep -c '"level":"\(WARN\|ERROR\)"' "$1" || true; }

# A schema with QueueBox's tables: mkschema NAME CONFIG
mkschema() {
    psql "$pg_url" -qAtX -v ON_ERROR_STOP=1 -c "DROP SCHEMA IF EXISTS $1 CASCADE; CREATE SCHEMA $1" \
        2>/dev/null
    "$queuebox" migrate --config "$2" >"$work/$1.migrate.log" 2>&1 \
        || die "queuebox migrate failed: $(tail -5 "$work/$1.migrate.log")"
}
dropschema() { psql "$pg_url" -qAtX -c "DROP SCHEMA IF EXISTS $1 CASCADE" >/dev/null 2>&1 || true; }

# Starts `queuebox run` and waits for `QueueBox started`; sets qb_pid and qb_port.
start_queuebox() {
    local config="$1" log="$2"
    "$queuebox" run --config "$config" </dev/null >/dev/null 2>"$log" &
    qb_pid=$!
    children+=("$qb_pid")
    for _ in $(seq 1 600); do
        kill -0 "$qb_pid" 2>/dev/null || die "queuebox exited at start: $(tail -5 "$log")"
        if grep -q 'QueueBox started' "$log"; then
            qb_port="$(grep 'QueueBox started' "$log" | grep -o '"httpPort":[0-9]*' | cut -d: -f2)"
            return 0
        fi
        sleep 0.1
    done
    die "queuebox did not start within 60 s: $(tail -5 "$log")"
}
stop_queuebox() {
    kill -TERM "$qb_pid"
    local status=0
    wait "$qb_pid" || status=$?
    [[ $status -eq 0 ]] || die "queuebox exited with $status at SIGTERM: $(tail -5 "$1")"
}

# --- facts -----------------------------------------------------------------------------------
# shellcheck source=bench/facts.sh
source "$root/bench/facts.sh"
pg_facts="$(psql "$pg_url" -qAtX -F'|' -c "SELECT
    current_setting('server_version'),
    current_setting('shared_buffers'), current_setting('synchronous_commit'),
    current_setting('fsync'), current_setting('wal_level'), current_setting('autovacuum'),
    current_setting('max_connections')")"
IFS='|' read -r pg_version pg_sb pg_sc pg_fsync pg_wal pg_av pg_maxconn <<<"$pg_facts"
pgbench_version="$("$pgbench" --version | awk '{ print $3 }')"
wrk_version="$({ wrk -v 2>&1 || true; } | awk 'NR == 1 { print $2 }')"
uptime_before="$(uptime)"
load_start="$(load)"
echo "uptime before: $uptime_before" >&2

# --- intake ----------------------------------------------------------------------------------
# The webhook body wrk sends (bench/inbox-intake.lua) has this shape; pgbench stores the same
# body and the headers QueueBox stores for a wrk request, in a row with the columns QueueBox
# writes.
cat >"$work/floor.sql" <<'EOF'
\set k random(1, 1000000000000)
\set c :k % 1000
INSERT INTO inbox (id, source, idempotency_key, aggregate_id, event_type, payload, headers, state, consumption, attempt, scheduled_at, created_at, correlation_id) VALUES (gen_random_uuid(), 'hooks', 'p' || :k, NULL, NULL, ('{"id":"p' || :k || '","type":"bench.webhook","data":{"seq":' || :k || ',"customer":"c' || :c || '","amount":1234,"currency":"EUR","note":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}}')::jsonb, '{"host":"127.0.0.1:40000","content-type":"application/json","content-length":"199"}'::jsonb, 'pending', 'pull', 0, clock_timestamp(), clock_timestamp(), gen_random_uuid()::text) ON CONFLICT (source, idempotency_key) DO NOTHING;
EOF

intake_yaml() {
    cat <<EOF
# Written by bench/inbox.sh for one benchmark phase.
database:
  type: postgresql
  url: "$(qb_url "$1")"
server:
  httpPort: 0
log:
  format: json
  level: info
sources:
  hooks:
    type: http
    path: /hooks
    consumption: pull
    idempotencyKeyPath: \$.id
EOF
}

# pgbench_floor PHASE -> sets f_tps f_tx f_failed f_p50 f_p99 f_rows f_load_before f_load_after
declare -A F
pgbench_floor() {
    local phase="$1" schema="${prefix}_$1"
    intake_yaml "$schema" >"$work/$phase.yml"
    mkschema "$schema" "$work/$phase.yml"
    F[$phase.load_before]="$(load)"
    mkdir -p "$work/$phase"
    PGOPTIONS="-c search_path=$schema" "$pgbench" "$pg_url" -n -M prepared -c "$connections" \
        -j "$threads" -T "$seconds" -f "$work/floor.sql" -l --log-prefix "$work/$phase/pgbench" \
        >"$work/$phase.out" 2>"$work/$phase.err" \
        || die "pgbench failed: $(tail -5 "$work/$phase.err")"
    F[$phase.load_after]="$(load)"
    F[$phase.tps]="$(awk '/^tps = / { print $3; exit }' "$work/$phase.out")"
    F[$phase.tx]="$(awk -F': ' '/number of transactions actually processed/ { print $2; exit }' "$work/$phase.out")"
    F[$phase.failed]="$(awk -F': ' '/number of failed transactions/ { split($2, a, " "); print a[1]; exit }' "$work/$phase.out")"
    F[$phase.failed]="${F[$phase.failed]:-0}"
    # Per-transaction log: client, transaction, latency µs, script, epoch s, µs.
    cat "$work/$phase"/pgbench* | awk '{ print $3 }' | sort -n >"$work/$phase.lat"
    local n
    n="$(wc -l <"$work/$phase.lat")"
    F[$phase.p50]="$(awk -v n="$n" 'NR == int((n * 50 + 99) / 100) { print $1 / 1000; exit }' "$work/$phase.lat")"
    F[$phase.p99]="$(awk -v n="$n" 'NR == int((n * 99 + 99) / 100) { print $1 / 1000; exit }' "$work/$phase.lat")"
    F[$phase.rows]="$(sq "$schema" -c "SELECT count(*) FROM inbox")"
    dropschema "$schema"
}

intake_queuebox() {
    local phase="intake" schema="${prefix}_intake"
    intake_yaml "$schema" >"$work/$phase.yml"
    mkschema "$schema" "$work/$phase.yml"
    start_queuebox "$work/$phase.yml" "$work/$phase.log"
    sleep 3
    I[idle_rss]="$(rss_mb "$qb_pid" VmRSS)"
    I[load_before]="$(load)"
    wrk -t "$threads" -c "$connections" -d "${seconds}s" --latency -s bench/inbox-intake.lua \
        "http://127.0.0.1:$qb_port/inbox/hooks" >"$work/$phase.wrk" 2>&1 \
        || die "wrk failed: $(tail -5 "$work/$phase.wrk")"
    I[load_after]="$(load)"
    I[peak_rss]="$(rss_mb "$qb_pid" VmHWM)"
    I[cpu]="$(cpu_s "$qb_pid")"
    local line
    line="$(grep '^wrk-result ' "$work/$phase.wrk")" || die "no wrk result: $(tail -5 "$work/$phase.wrk")"
    for kv in ${line#wrk-result }; do I[wrk_${kv%%=*}]="${kv#*=}"; done
    I[rows]="$(sq "$schema" -c "SELECT count(*) FROM inbox")"
    I[distinct]="$(sq "$schema" -c "SELECT count(DISTINCT idempotency_key) FROM inbox")"
    # The insert reads the clock once per batch (queries/inbox/insert.sql), so every row of one
    # writer batch has the same created_at: distinct values = batches.
    read -r "I[batches]" "I[batch_max]" <<<"$(sq "$schema" -F' ' -c "SELECT count(*), max(n)
        FROM (SELECT count(*) AS n FROM inbox GROUP BY created_at) b")"
    I[payload_bytes]="$(sq "$schema" -c "SELECT round(avg(octet_length(payload::text)), 1) FROM inbox")"
    stop_queuebox "$work/$phase.log"
    I[complaints]="$(complaints "$work/$phase.log")"
    dropschema "$schema"
}

# --- relay -----------------------------------------------------------------------------------
relay_yaml() {
    cat <<EOF
# Written by bench/inbox.sh for one benchmark phase.
database:
  type: postgresql
  url: "$(qb_url "$1")"
server:
  httpPort: 0
log:
  format: json
  level: info
inbox:
  relay:
    batchSize: $relay_batch
sources:
  relayed:
    type: http
    path: /relayed
    idempotencyKeyPath: \$.id
    topic: bench.relayed
destinations:
  sink:
    type: log
    file: $work/$2.deliveries.jsonl
routes:
  - topicPattern: "**"
    destination: sink
EOF
}

# The relayed outbox rows are parked as `sent` by a trigger, so the outbox poller (woken after
# every relay batch, OUT-56) finds nothing to deliver and does not compete with the relay. The
# floor's schema has the same trigger, so both pay for it.
relay_prepare() {
    local schema="$1"
    sq "$schema" <<'EOF'
CREATE FUNCTION qb_bench_park() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN NEW.state := 'sent'; RETURN NEW; END $$;
CREATE TRIGGER qb_bench_park BEFORE INSERT ON outbox FOR EACH ROW EXECUTE FUNCTION qb_bench_park();
EOF
}
# One transaction: the push rows and ANALYZE inbox (autovacuum is off on the test server; see
# bench/README.md). Prints the insert's time in ms and the database clock after COMMIT (epoch s).
relay_insert() {
    local schema="$1" t0 t1
    t0="$(date +%s.%N)"
    sq "$schema" >"$work/$schema.insert" <<EOF
BEGIN;
INSERT INTO inbox (id, source, idempotency_key, aggregate_id, event_type, payload, headers,
                   state, consumption, attempt, scheduled_at, created_at, correlation_id)
SELECT gen_random_uuid(), 'relayed', 'r' || i,
       CASE WHEN i % 10 = 0 THEN NULL ELSE 'k' || (i % 1000) END, 'bench.webhook',
       ('{"id":"r' || i || '","type":"bench.webhook","data":{"seq":' || i || ',"customer":"c'
        || (i % 1000) || '","amount":1234,"currency":"EUR","note":"' || repeat('x', 80)
        || '"}}')::jsonb,
       '{"host":"127.0.0.1:40000","content-type":"application/json","content-length":"199"}'::jsonb,
       'pending', 'push', 0, clock_timestamp(), clock_timestamp(), gen_random_uuid()::text
FROM generate_series(1, $relay_rows) AS i;
ANALYZE inbox;
COMMIT;
SELECT extract(epoch FROM clock_timestamp());
EOF
    t1="$(date +%s.%N)"
    inserted_ms="$(calc "($t1 - $t0) * 1000")"
    inserted_at="$(tail -1 "$work/$schema.insert")"
}
relay_check() {
    local schema="$1" got
    got="$(sq "$schema" -c "SELECT count(*) FILTER (WHERE state = 'processed') || ' ' ||
        (SELECT count(*) FROM outbox) FROM inbox")"
    [[ "$got" == "$relay_rows $relay_rows" ]] \
        || die "$schema: processed inbox rows and outbox rows: $got, expected $relay_rows each"
}
idx_scans() {
    sq "$1" -c "SELECT coalesce(sum(idx_scan) FILTER (WHERE indexrelname = 'idx_inbox_push_pending'), 0)
        || ' ' || coalesce(sum(idx_scan) FILTER (WHERE indexrelname = 'idx_outbox_pending'), 0)
        FROM pg_stat_user_indexes WHERE schemaname = '$1'"
}

declare -A R RF I
relay_floor_run() {
    local phase="$1" schema="${prefix}_$1"
    relay_yaml "$schema" "$phase" >"$work/$phase.yml"
    mkschema "$schema" "$work/$phase.yml"
    relay_prepare "$schema"
    relay_insert "$schema"
    RF[$phase.load_before]="$(load)"
    local line
    line="$("$relay_floor" --config "$work/$phase.yml" 2>"$work/$phase.err")" \
        || die "qb-relay-floor failed: $(tail -5 "$work/$phase.err")"
    RF[$phase.load_after]="$(load)"
    for kv in $line; do RF[$phase.${kv%%=*}]="${kv#*=}"; done
    relay_check "$schema"
    sleep 1 # pg_stat reports are flushed at most once a second
    read -r "RF[$phase.claim_scans]" "RF[$phase.outbox_scans]" <<<"$(idx_scans "$schema")"
    dropschema "$schema"
}

relay_queuebox() {
    local phase="relay" schema="${prefix}_relay"
    relay_yaml "$schema" "$phase" >"$work/$phase.yml"
    mkschema "$schema" "$work/$phase.yml"
    relay_prepare "$schema"
    start_queuebox "$work/$phase.yml" "$work/$phase.log"
    sleep 3
    R[idle_rss]="$(rss_mb "$qb_pid" VmRSS)"
    R[cpu_idle]="$(cpu_s "$qb_pid")"
    read -r "R[claim_scans0]" "R[outbox_scans0]" <<<"$(idx_scans "$schema")"
    R[load_before]="$(load)"
    relay_insert "$schema"
    R[insert_ms]="$inserted_ms"
    R[committed]="$inserted_at"
    local deadline=$((SECONDS + 1800)) left
    while :; do
        left="$(sq "$schema" -c "SELECT $relay_rows - count(*) FROM outbox")"
        [[ "$left" -eq 0 ]] && break
        ((SECONDS < deadline)) || die "relay: $left rows still not forwarded after 30 minutes"
        kill -0 "$qb_pid" 2>/dev/null || die "queuebox died: $(tail -5 "$work/$phase.log")"
        sleep 0.25
    done
    R[load_after]="$(load)"
    R[peak_rss]="$(rss_mb "$qb_pid" VmHWM)"
    R[cpu]="$(cpu_s "$qb_pid")"
    relay_check "$schema"
    # The last forward's commit, by the database clock; the first forward's.
    read -r "R[last]" "R[first]" <<<"$(sq "$schema" -F' ' -c "SELECT extract(epoch FROM max(processed_at)),
        extract(epoch FROM min(processed_at)) FROM inbox")"
    stop_queuebox "$work/$phase.log"
    sleep 1
    read -r "R[claim_scans]" "R[outbox_scans]" <<<"$(idx_scans "$schema")"
    R[complaints]="$(complaints "$work/$phase.log")"
    dropschema "$schema"
}

say "intake floor (pgbench), first run"
pgbench_floor intake_floor1
say "intake (wrk -> queuebox)"
intake_queuebox
say "intake floor (pgbench), second run"
pgbench_floor intake_floor2
say "relay floor, first run"
relay_floor_run relay_floor1
say "relay (queuebox)"
relay_queuebox
say "relay floor, second run"
relay_floor_run relay_floor2
load_end="$(load)"
uptime_after="$(uptime)"
echo "uptime after: $uptime_after" >&2
say "done; writing $out"

# --- figures ---------------------------------------------------------------------------------
wrk_s="$(calc "${I[wrk_duration_us]} / 1e6")"
accepted=$((I[wrk_requests] - I[wrk_status_errors]))
accepted_s="$(calc "$accepted / $wrk_s")"
requests_s="$(calc "${I[wrk_requests]} / $wrk_s")"
floor_tps() { calc "${F[$1.tps]}"; }
best_floor="$(awk -v a="${F[intake_floor1.tps]}" -v b="${F[intake_floor2.tps]}" 'BEGIN { print (a > b ? a : b) }')"
intake_ratio="$(calc "$accepted_s / $best_floor")"
relay_s="$(calc "${R[last]} - ${R[committed]}")"
relay_rate="$(calc "$relay_rows / $relay_s")"
relay_window="$(calc "${R[last]} - ${R[first]}")"
rf_rate() { calc "${RF[$1.rows]} / ${RF[$1.seconds]}"; }
best_relay_floor="$(awk -v a="$(rf_rate relay_floor1)" -v b="$(rf_rate relay_floor2)" 'BEGIN { print (a > b ? a : b) }')"
relay_ratio="$(calc "$relay_rate / $best_relay_floor")"
relay_claims=$((R[claim_scans] - R[claim_scans0]))
outbox_claims=$((R[outbox_scans] - R[outbox_scans0]))
yes_no() { awk -v x="$1" -v aim="$2" 'BEGIN { print (x >= aim ? "yes" : "**no**") }'; }
ms() { dec "$(calc "$1 / 1000")" 1; }

if [[ "$(yes_no "$intake_ratio" 2)" == yes ]]; then
    intake_short="The aim was met in this run: the intake accepted $(int "$accepted_s") webhooks/s, $(dec "$intake_ratio" 2) × the faster pgbench floor ($(int "$best_floor") transactions/s), with a p99 of $(ms "${I[wrk_p99_us]}") ms."
else
    intake_short="In this run the intake accepted $(int "$accepted_s") webhooks/s, $(dec "$intake_ratio" 2) × the faster pgbench floor ($(int "$best_floor") transactions/s), below the aim of 2 ×; its p99 was $(ms "${I[wrk_p99_us]}") ms."
fi
intake_short="$intake_short QueueBox's intake writer stored the $(int "${I[rows]}") rows in $(int "${I[batches]}") \`INSERT\` transactions, $(dec "$(calc "${I[rows]} / ${I[batches]}")" 1) rows each on average (at most ${I[batch_max]}), one transaction at a time; QueueBox itself used ${I[cpu]} s of CPU in all."
if [[ "$(yes_no "$relay_ratio" 0.5)" == yes ]]; then
    relay_short="The aim was met in this run: the relay forwarded $(int "$relay_rate") rows/s, $(dec "$relay_ratio" 2) × the faster SQL floor ($(int "$best_relay_floor") rows/s)."
else
    relay_short="In this run the relay forwarded $(int "$relay_rate") rows/s, $(dec "$relay_ratio" 2) × the faster SQL floor ($(int "$best_relay_floor") rows/s), below the aim of 0.5 ×."
fi
relay_short="$relay_short QueueBox ran $(int "$outbox_claims") outbox claim statements while it forwarded $(int "$relay_rows") rows, $(dec "$(calc "$outbox_claims / $relay_rows")" 3) per forwarded row: the relay wakes the outbox poller once per relay batch of $relay_batch (OUT-56, coalesced), and the poller also claims every \`pollIntervalMs\` (100 ms); the floor has no poller."

machine="$cores cores ($cpu_model), $(dec "$mem_gb" 1) GB memory"
pg_line="PostgreSQL $pg_version on the same machine (127.0.0.1), untuned: \`shared_buffers\` $pg_sb, \`synchronous_commit\` $pg_sc, \`fsync\` $pg_fsync, \`wal_level\` $pg_wal, \`autovacuum\` $pg_av, \`max_connections\` $pg_maxconn."
load_line="Load average (1, 5, 15 min) at the start: $load_start; at the end: $load_end (\`uptime\` before: \`${uptime_before# }\`; after: \`${uptime_after# }\`). Other engineers compile and test on these $cores cores at the same time, so absolute figures move from run to run; the ratios, measured side by side in one run, are the figures that count."

intake_section="$(cat <<EOF
<!-- inbox-intake-benchmark:begin: written by bench/inbox.sh; edits inside are overwritten -->
## Inbox intake: concurrent webhooks

Command: \`bench/inbox.sh\` (what it does: [bench/README.md](../bench/README.md#benchinboxsh)).

- Run: $date_run UTC, commit $commit.
- Machine: $machine.
- $pg_line
- $load_line
- Load: wrk $wrk_version, \`-t $threads -c $connections -d ${seconds}s\`, on the same machine: every request is a \`POST /inbox/hooks\` of a unique webhook (a JSON body of ${I[payload_bytes]} bytes as stored; \`\$.id\` is the wrk thread and a per-thread counter, [bench/inbox-intake.lua](../bench/inbox-intake.lua)). Latency is wrk's, from the request's write to its response.
- QueueBox: the release build, one \`http\` source \`hooks\` with \`idempotencyKeyPath: \$.id\` and \`consumption: pull\`, so the relay has no row to take and does not compete (it runs, with no push source to claim for); every other setting at its default (\`poolSize\` 10). Fresh schema, empty inbox.
- Floor: pgbench $pgbench_version, \`-n -M prepared -c $connections -j $threads -T $seconds\`, each transaction one autocommitted \`INSERT … ON CONFLICT (source, idempotency_key) DO NOTHING\` of one row into a freshly migrated inbox table, with the columns QueueBox writes, the same body shape and the headers QueueBox stores for a wrk request; the key is \`random(1, 10^12)\`. It ran before and after the QueueBox phase, each time in a fresh schema; the ratio uses the faster run.
- Memory is in MB of 10^6 bytes. Idle RSS: \`VmRSS\` 3 s after \`QueueBox started\`. Peak RSS: \`VmHWM\` when wrk finished.

| | QueueBox (wrk) | floor run 1 (pgbench) | floor run 2 (pgbench) |
|---|---|---|---|
| **accepted/s** (202 answers ÷ run time) | **$(int "$accepted_s")** | $(int "${F[intake_floor1.tps]}") | $(int "${F[intake_floor2.tps]}") |
| **ratio to the faster floor** | **$(dec "$intake_ratio" 2)** | | |
| **p99 latency** | **$(ms "${I[wrk_p99_us]}") ms** | $(dec "${F[intake_floor1.p99]}" 1) ms | $(dec "${F[intake_floor2.p99]}" 1) ms |
| p50 latency | $(ms "${I[wrk_p50_us]}") ms | $(dec "${F[intake_floor1.p50]}" 1) ms | $(dec "${F[intake_floor2.p50]}" 1) ms |
| p90 / max latency | $(ms "${I[wrk_p90_us]}") ms / $(ms "${I[wrk_max_us]}") ms | | |
| writer batches (one \`INSERT\` transaction each) / rows per batch, mean and max | $(int "${I[batches]}") / $(dec "$(calc "${I[rows]} / ${I[batches]}")" 1), ${I[batch_max]} | one row per transaction | one row per transaction |
| requests / rows stored (distinct keys) | $(int "${I[wrk_requests]}") / $(int "${I[rows]}") ($(int "${I[distinct]}")) | $(int "${F[intake_floor1.tx]}") / $(int "${F[intake_floor1.rows]}") | $(int "${F[intake_floor2.tx]}") / $(int "${F[intake_floor2.rows]}") |
| run time | $(dec "$wrk_s" 2) s | ${seconds} s | ${seconds} s |
| non-2xx / socket errors (connect, read, write, timeout) | ${I[wrk_status_errors]} / ${I[wrk_connect_errors]}, ${I[wrk_read_errors]}, ${I[wrk_write_errors]}, ${I[wrk_timeouts]} | failed transactions: ${F[intake_floor1.failed]} | failed transactions: ${F[intake_floor2.failed]} |
| idle RSS / peak RSS | $(dec "${I[idle_rss]}" 1) MB / $(dec "${I[peak_rss]}" 1) MB | | |
| queuebox CPU time (user + system, whole life) | ${I[cpu]} s | | |
| warnings and errors logged | ${I[complaints]} | | |
| load average before → after | ${I[load_before]} → ${I[load_after]} | ${F[intake_floor1.load_before]} → ${F[intake_floor1.load_after]} | ${F[intake_floor2.load_before]} → ${F[intake_floor2.load_after]} |

wrk's requests/s was $(int "$requests_s"); accepted/s counts only the 202 answers wrk received within its run. The inbox held a few more rows than wrk counted answers: the requests still in flight when wrk stopped were stored, but wrk does not count them. pgbench's figure is its \`tps\` without the initial connection time, and its latencies are from its per-transaction log.

| Aim | Measured | Met |
|---|---|---|
| intake ≥ 2 × the pgbench floor | $(dec "$intake_ratio" 2) × ($(int "$accepted_s") of $(int "$best_floor") rows/s) | $(yes_no "$intake_ratio" 2) |

### Where it falls short

$intake_short
<!-- inbox-intake-benchmark:end -->
EOF
)"

relay_section="$(cat <<EOF
<!-- inbox-relay-benchmark:begin: written by bench/inbox.sh; edits inside are overwritten -->
## Inbox relay: push rows into the outbox

Command: \`bench/inbox.sh\` (what it does: [bench/README.md](../bench/README.md#benchinboxsh)); the same run as the intake above.

- Rows: $(int "$relay_rows") pending push rows of the source \`relayed\`, inserted in one \`INSERT … SELECT … generate_series\` with \`ANALYZE inbox\` in the same transaction (autovacuum is off here; the insert took $(int "${R[insert_ms]}") ms); every tenth row has no aggregate id, the others \`k0\`..\`k999\` round robin; the same ~200-byte body as the intake.
- QueueBox: the release build, the source with a fixed \`topic: bench.relayed\`, a \`log\` destination and a \`**\` route; \`inbox.relay.batchSize\` $relay_batch; every other setting at its default (\`pollIntervalMs\` 100, \`poolSize\` 10). The relay forwards one row per transaction (RLY-9).
- Outbox parked: a \`BEFORE INSERT\` trigger in the benchmark schema sets every new outbox row's \`state\` to \`sent\`, so the outbox poller (woken after every relay batch, OUT-56) finds nothing to deliver and only the relay is measured. The floor's schema has the same trigger.
- Floor: \`qb-relay-floor\` runs the store's own \`relay_claim($relay_batch)\` then \`relay_forward\` for each claimed row (the outbox row built as the relay builds it), one after the other on one connection, until a claim returns nothing; no QueueBox process, no lease renewal, no outbox poller. Before and after the QueueBox phase, each on a fresh copy of the rows; the ratio uses the faster run.
- Relay time: from the database clock after the insert's COMMIT to the last inbox row's \`processed_at\` (the last forward). The floor's time is its own loop, from its first claim to the empty one.

| | QueueBox | floor run 1 | floor run 2 |
|---|---|---|---|
| **rows/s** | **$(int "$relay_rate")** | $(int "$(rf_rate relay_floor1)") | $(int "$(rf_rate relay_floor2)") |
| **ratio to the faster floor** | **$(dec "$relay_ratio" 2)** | | |
| time | $(dec "$relay_s" 2) s (first → last forward: $(dec "$relay_window" 2) s) | $(dec "${RF[relay_floor1.seconds]}" 2) s | $(dec "${RF[relay_floor2.seconds]}" 2) s |
| scans of \`idx_inbox_push_pending\` (relay claims; also any other query that uses the index) | $(int "$relay_claims") | $(int "${RF[relay_floor1.claims]}") claims ($(int "${RF[relay_floor1.claim_scans]}") scans) | $(int "${RF[relay_floor2.claims]}") claims ($(int "${RF[relay_floor2.claim_scans]}") scans) |
| outbox claim statements meanwhile (scans of \`idx_outbox_pending\`) / per forwarded row | $(int "$outbox_claims") / $(dec "$(calc "$outbox_claims / $relay_rows")" 3) | ${RF[relay_floor1.outbox_scans]} | ${RF[relay_floor2.outbox_scans]} |
| rows forwarded and marked \`processed\` | $(int "$relay_rows") | $(int "${RF[relay_floor1.rows]}") | $(int "${RF[relay_floor2.rows]}") |
| idle RSS / peak RSS | $(dec "${R[idle_rss]}" 1) MB / $(dec "${R[peak_rss]}" 1) MB | | |
| queuebox CPU time (user + system, whole life) | ${R[cpu]} s | | |
| warnings and errors logged | ${R[complaints]} | | |
| load average before → after | ${R[load_before]} → ${R[load_after]} | ${RF[relay_floor1.load_before]} → ${RF[relay_floor1.load_after]} | ${RF[relay_floor2.load_before]} → ${RF[relay_floor2.load_after]} |

| Aim | Measured | Met |
|---|---|---|
| relay ≥ 0.5 × the SQL floor | $(dec "$relay_ratio" 2) × ($(int "$relay_rate") of $(int "$best_relay_floor") rows/s) | $(yes_no "$relay_ratio" 0.5) |

### Where it falls short

$relay_short
<!-- inbox-relay-benchmark:end -->
EOF
)"

# Replaces the text between a section's markers, or appends the section; the rest of the page
# stays as it is.
splice() {
    local file="$1" name="$2" section_file="$3" tmp
    tmp="$(mktemp)"
    if [[ -f "$file" ]] && grep -q "<!-- $name:begin" "$file"; then
        awk -v name="$name" -v sf="$section_file" '
            index($0, "<!-- " name ":begin") == 1 { while ((getline l < sf) > 0) print l; skip = 1; next }
            skip && index($0, "<!-- " name ":end") == 1 { skip = 0; next }
            !skip { print }' "$file" >"$tmp"
    else
        { [[ -f "$file" ]] && cat "$file" && echo; cat "$section_file"; } >"$tmp"
    fi
    cat "$tmp" >"$file"
    rm -f "$tmp"
}
printf '%s\n' "$intake_section" >"$work/intake.md"
printf '%s\n' "$relay_section" >"$work/relay.md"
splice "$out" inbox-intake-benchmark "$work/intake.md"
splice "$out" inbox-relay-benchmark "$work/relay.md"
cat "$work/intake.md" "$work/relay.md"
echo "inbox.sh: wrote the inbox intake and relay sections of $out" >&2
ok=1
