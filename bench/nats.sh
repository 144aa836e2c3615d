#!/usr/bin/env bash
# The NATS JetStream benchmarks (docs/benchmarks.md, "NATS"): builds the release `queuebox` and
# the bench binaries, then, against the local PostgreSQL (postgres://postgres@127.0.0.1:5432/test)
# and the local JetStream server (nats://127.0.0.1:4222), in this order:
#
#   intake
#     1. raw consumer floor: qb-nats-floor (async-nats, a durable pull consumer, explicit ack,
#        fetches of the same batch size) drains N messages
#     2. pgbench floor: single-row INSERT ... ON CONFLICT DO NOTHING, as many clients as the batch
#     3. QueueBox: a push nats source (relay off) drains N messages already in the stream
#     3a. the inbox table's ceiling, no client (bench/ceiling.sh): one INSERT ... SELECT of N rows
#   delivery
#     4. raw publisher floor: qb-nats-floor publishes N messages through JetStream,
#        outbox.concurrency publishes in flight, each waiting for its stream acknowledgement
#        (QueueBox's acknowledgement mode)
#     5. SQL floor: qb-sql-floor (QueueBox's claim + mark statements, no delivery) on N rows
#     6. QueueBox: N outbox rows published to a subject of a stream
#
# and rewrites the NATS section of docs/benchmarks.md (nothing else on the page).
#
#   bench/nats.sh                          # the documented run
#   bench/nats.sh --messages 5000 --out /tmp/b.md   # a quick try
#
# Options: --messages N (100000), --batch N (50), --concurrency N (8), --out FILE.
# QUEUEBOX_BENCH_BIN_DIR=DIR runs the queuebox, qb-nats-floor and qb-sql-floor already in DIR.
# Not part of scripts/test.sh: benchmarks are never timed tests.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')}"
pg_url="${QUEUEBOX_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
nats_url="${QUEUEBOX_BENCH_NATS_URL:-nats://127.0.0.1:4222}"
messages=100000 batch=50 concurrency=8 out="docs/benchmarks.md"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --messages) messages="$2"; shift 2 ;;
        --batch) batch="$2"; shift 2 ;;
        --concurrency) concurrency="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
        *) echo "nats.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

load() { cut -d' ' -f1-3 /proc/loadavg; }
say() { echo "nats.sh: $* (load $(load))" >&2; }
die() { echo "nats.sh: $*" >&2; exit 1; }

pgbench="$(ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -1 || true)"
[[ -n "$pgbench" ]] || pgbench="$(command -v pgbench || true)"
[[ -n "$pgbench" ]] || die "pgbench is missing (apt-get install -y postgresql-contrib)"
scripts/services.sh postgres nats || die "PostgreSQL or NATS is not up"
python="$(scripts/pyenv.sh)"
natspy() { "$python" crates/queuebox-nats/tests/support/nats_client.py "$nats_url" "$@"; }
stream_messages() { natspy stream-info "$1" | sed -nE 's/.*"messages": ([0-9]+).*/\1/p'; }

say "building the release binaries"
# QUEUEBOX_BENCH_PROFILE=debug: a quick check of the script itself with the debug build (never
# for figures).
profile="${QUEUEBOX_BENCH_PROFILE:-release}"
profile_flag=(--release)
[[ "$profile" == release ]] || profile_flag=()
# QUEUEBOX_BENCH_BIN_DIR=DIR: run the binaries already built in DIR instead (a before/after
# pair of two builds, each run by the same script).
bin_dir="${QUEUEBOX_BENCH_BIN_DIR:-}"
if [[ -z "$bin_dir" ]]; then
    cargo build "${profile_flag[@]}" --quiet -p queuebox -p queuebox-bench \
        --bin queuebox --bin qb-nats-floor --bin qb-sql-floor
    bin_dir="$target/$profile"
fi
work="$(mktemp -d /tmp/qb-nats-bench-XXXX)"
# Copies: other builds in a shared target directory may overwrite the originals meanwhile.
cp "$bin_dir/queuebox" "$bin_dir/qb-nats-floor" "$bin_dir/qb-sql-floor" "$work/"
qb="$work/queuebox" floor="$work/qb-nats-floor" sqlfloor="$work/qb-sql-floor"
export QUEUEBOX_BENCH_NATS_URL="$nats_url"

source bench/facts.sh
source bench/wait.sh
source bench/ceiling.sh
load_start="$(load)"
run_id="$$"
in_stream="QB_BENCH_IN_$run_id" out_stream="QB_BENCH_OUT_$run_id"
in_subject="qb_bench_in_$run_id.orders" out_subject="qb_bench_out_$run_id.orders"
trap 'natspy delete-stream "$in_stream" >/dev/null 2>&1 || true; natspy delete-stream "$out_stream" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT

psql_q() { psql "$pg_url" -qtAX -c "$1"; }
schema_url() { echo "$pg_url?options=-c%20search_path%3D$1"; }
new_schema() { psql_q "DROP SCHEMA IF EXISTS $1 CASCADE; CREATE SCHEMA $1;" >/dev/null; }
count_in() { psql "$(schema_url "$1")" -qtAX -c "$2"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
now() { date +%s.%N; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%d", n / s }'; }
mb() { awk -v kb="$1" 'BEGIN { printf "%.1f", kb * 1024 / 1e6 }'; }
rss() { awk -v k="$2" '$1 == k":" { print $2 }' "/proc/$1/status"; }

# QueueBox refuses unknown QUEUEBOX_* variables: it runs without the bench's own.
# (`env` replaces itself with QueueBox, so `$!` below is QueueBox's own pid.)
read -ra bench_unset <<<"$(compgen -e | grep '^QUEUEBOX_BENCH_' | sed 's/^/-u /' | tr '\n' ' ')"
qbx() { env "${bench_unset[@]}" "$qb" "$@"; }
# Starts QueueBox with config $1, logging to $2; waits for "QueueBox started"; sets qb_pid.
start_qb() {
    env "${bench_unset[@]}" "$qb" run --config "$1" 2>"$2" >/dev/null &
    qb_pid=$!
    for _ in $(seq 1 300); do
        grep -q '"QueueBox started"' "$2" && return 0
        kill -0 "$qb_pid" 2>/dev/null || { cat "$2" >&2; die "QueueBox exited"; }
        sleep 0.1
    done
    die "QueueBox did not start"
}
stop_qb() { kill -TERM "$qb_pid"; wait "$qb_pid" || true; }
warnings() { grep -c '"level":"\(WARN\|ERROR\)"' "$1" || true; }

# --- intake -------------------------------------------------------------------------------------
natspy create-stream "$in_stream" "qb_bench_in_$run_id.>" >/dev/null

say "intake 1: raw consumer floor"
"$floor" fill "$in_subject" "$messages" >/dev/null
l0="$(load)"
floor_consume="$("$floor" consume "$in_stream" floor "$messages" "$batch")"
l1="$(load)"
consume_s="${floor_consume##*seconds=}"

say "intake 2: pgbench floor"
new_schema qb_bench_pgbench
psql "$(schema_url qb_bench_pgbench)" -qX -c "CREATE TABLE t (k text PRIMARY KEY, payload jsonb NOT NULL)"
echo "INSERT INTO t VALUES (md5(random()::text || clock_timestamp()::text), '{\"id\":1}') ON CONFLICT DO NOTHING;" >"$work/insert.sql"
l2="$(load)"
pgbench_out="$(PGOPTIONS='-c search_path=qb_bench_pgbench' "$pgbench" -n -c "$batch" -j 2 -T 15 -f "$work/insert.sql" "$pg_url" 2>&1)"
l3="$(load)"
pgbench_tps="$(sed -nE 's/^tps = ([0-9.]+).*/\1/p' <<<"$pgbench_out" | head -1 | cut -d. -f1)"
psql_q "DROP SCHEMA qb_bench_pgbench CASCADE" >/dev/null

say "intake 3: QueueBox"
new_schema qb_bench_intake
cat >"$work/intake.yml" <<YAML
database:
  url: "$(schema_url qb_bench_intake)"
server:
  httpPort: 0
inbox:
  relay:
    enabled: false
sources:
  orders:
    type: nats
    servers: $nats_url
    stream: $in_stream
    durable: queuebox
    batchSize: $batch
destinations:
  sink:
    type: log
    file: /dev/null
routes:
  - topicPattern: "**"
    destination: sink
YAML
# The floor's messages stay in the stream (limits retention) and a new durable reads the
# stream's history, so the stream starts empty again: the idle process creates its durable on
# it and reads nothing; the measured run then drains the N messages filled after it.
natspy delete-stream "$in_stream" >/dev/null
natspy create-stream "$in_stream" "qb_bench_in_$run_id.>" >/dev/null
start_qb "$work/intake.yml" "$work/intake-idle.log"
sleep 3
intake_idle_kb="$(rss "$qb_pid" VmRSS)"
stop_qb
"$floor" fill "$in_subject" "$messages" >/dev/null
l4="$(load)"
t0="$(now)"
start_qb "$work/intake.yml" "$work/intake.log"
wait_while "$(schema_url qb_bench_intake)" "(SELECT count(*) FROM inbox) < $messages"
t1="$(now)"
intake_peak_kb="$(rss "$qb_pid" VmHWM)"
intake_cpu="$(awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$qb_pid/stat")"
stop_qb
l5="$(load)"
intake_s="$(elapsed "$t0" "$t1")"
intake_rows="$(count_in qb_bench_intake 'SELECT count(*) FROM inbox')"
# Each insert transaction gives its rows one created_at (now()): how many the writer made.
intake_inserts="$(count_in qb_bench_intake 'SELECT count(DISTINCT created_at) FROM inbox')"
say "intake: QueueBox stored $intake_rows rows in $intake_inserts insert transactions"
intake_left="$(natspy consumer-info "$in_stream" queuebox | sed -nE 's/.*"num_ack_pending": ([0-9]+).*"num_pending": ([0-9]+).*/\1 unacknowledged, \2 not delivered/p')"
intake_warn="$(warnings "$work/intake.log")"
say "intake 3a: the inbox table's ceiling"
count_in qb_bench_intake 'TRUNCATE inbox' >/dev/null
ceiling_s="$(inbox_ceiling "$pg_url" qb_bench_intake "$messages")"
say "intake: the inbox table's ceiling $(rate "$messages" "$ceiling_s")/s"
psql_q "DROP SCHEMA qb_bench_intake CASCADE" >/dev/null
natspy delete-stream "$in_stream" >/dev/null

# --- delivery -----------------------------------------------------------------------------------
natspy create-stream "$out_stream" "qb_bench_out_$run_id.>" >/dev/null

say "delivery 4: raw publisher floor"
l6="$(load)"
floor_publish="$("$floor" publish "$out_subject" "$messages" "$concurrency")"
l7="$(load)"
publish_s="${floor_publish##*seconds=}"
natspy delete-stream "$out_stream" >/dev/null
natspy create-stream "$out_stream" "qb_bench_out_$run_id.>" >/dev/null

fill_outbox() { # schema
    count_in "$1" "INSERT INTO outbox (topic, key, payload) SELECT 'bench.order.created', 'k' || (g % 1000), json_build_object('id', 'm-' || g, 'n', g, 'pad', repeat('x', 150))::jsonb FROM generate_series(1, $messages) g; ANALYZE outbox;" >/dev/null
}
cat >"$work/delivery.yml" <<YAML
database:
  url: "$(schema_url qb_bench_delivery)"
server:
  httpPort: 0
outbox:
  concurrency: $concurrency
destinations:
  broker:
    type: nats
    servers: $nats_url
    subject: $out_subject
routes:
  - topicPattern: "**"
    destination: broker
YAML

say "delivery 5: SQL floor"
new_schema qb_bench_delivery
qbx migrate --config "$work/delivery.yml" >/dev/null 2>&1
fill_outbox qb_bench_delivery
l8="$(load)"
sql_floor="$("$sqlfloor" --config "$work/delivery.yml")"
l9="$(load)"
sql_s="$(sed -nE 's/.*seconds=([0-9.]+).*/\1/p' <<<"$sql_floor")"
psql_q "DROP SCHEMA qb_bench_delivery CASCADE" >/dev/null

say "delivery 6: QueueBox"
new_schema qb_bench_delivery
start_qb "$work/delivery.yml" "$work/delivery-idle.log"
sleep 3
delivery_idle_kb="$(rss "$qb_pid" VmRSS)"
stop_qb
fill_outbox qb_bench_delivery
l10="$(load)"
t0="$(now)"
start_qb "$work/delivery.yml" "$work/delivery.log"
# The end is the last row leaving pending/processing: one index probe a poll, where counting
# the sent rows read a growing share of the table ten times a second beside the run it measures.
wait_while "$(schema_url qb_bench_delivery)" "EXISTS (SELECT 1 FROM outbox WHERE state IN ('pending', 'processing'))"
t1="$(now)"
delivery_sent="$(count_in qb_bench_delivery "SELECT count(*) FROM outbox WHERE state = 'sent'")"
[[ "$delivery_sent" -eq "$messages" ]] || { stop_qb; die "delivery: $delivery_sent of $messages rows sent, the others dead"; }
delivery_peak_kb="$(rss "$qb_pid" VmHWM)"
delivery_cpu="$(awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$qb_pid/stat")"
stop_qb
l11="$(load)"
delivery_s="$(elapsed "$t0" "$t1")"
delivery_seen="$(stream_messages "$out_stream")"
delivery_warn="$(warnings "$work/delivery.log")"
psql_q "DROP SCHEMA qb_bench_delivery CASCADE" >/dev/null
natspy delete-stream "$out_stream" >/dev/null
load_end="$(load)"

# --- the page section ---------------------------------------------------------------------------
r_consume="$(rate "$messages" "$consume_s")"
r_intake="$(rate "$messages" "$intake_s")"
r_ceiling="$(rate "$messages" "$ceiling_s")"
r_publish="$(rate "$messages" "$publish_s")"
r_sql="$(rate "$messages" "$sql_s")"
r_delivery="$(rate "$messages" "$delivery_s")"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", int(a / b * 100) / 100 }'; }
lower=$(( r_publish < r_sql ? r_publish : r_sql ))
nats_version="$(nats-server --version 2>/dev/null | sed -nE 's/.*v([0-9.]+).*/\1/p' || echo unknown)"
pg_version="$(psql_q 'SHOW server_version')"
section="$work/section.md"
cat >"$section" <<MD
<!-- nats-benchmark:begin: written by bench/nats.sh; edits inside are overwritten -->
## NATS JetStream: intake and delivery

Command: \`bench/nats.sh\` (the phases are listed at the top of the script).

- Run: $date_run UTC, commit $commit.
- Machine: $cores cores ($cpu_model), $(printf '%.1f' "$mem_gb") GB memory; the load averages (1, 5, 15 min) beside each phase say how busy it was.
- nats-server $nats_version (JetStream, file storage) and PostgreSQL $pg_version on the same machine (127.0.0.1), untuned, default settings.
- Messages: $messages JSON bodies of about 190 bytes (\`{"id":"m-<i>","n":<i>,"pad":"x…"}\`), each with its own id, in a stream of the run's own.
- QueueBox: the release build. Intake: one push \`nats\` source (a durable pull consumer it creates), \`batchSize\` $batch, the relay off (\`inbox.relay.enabled: false\`), the messages already in the stream; measured from the start of the process to the last row committed (the start-up is inside). Delivery: one \`nats\` destination (JetStream publish with acknowledgement, one subject of a stream), \`outbox.concurrency\` $concurrency, the rows inserted and analyzed before the start; measured from the start of the process to the last row \`sent\`.
- Memory in MB of 10^6 bytes. Idle RSS: \`VmRSS\` 3 s after \`QueueBox started\` with nothing to do. Peak RSS: \`VmHWM\` when the last row was written.
- Load average at the start of the run: $load_start; at the end: $load_end.

### Intake: $messages messages from the stream into the inbox

| | messages/s | time | load before → after |
|---|---|---|---|
| raw consumer floor (async-nats, durable pull consumer, fetches of $batch, explicit ack, no database) | $r_consume | ${consume_s} s | $l0 → $l1 |
| pgbench floor (single-row \`INSERT … ON CONFLICT DO NOTHING\`, $batch clients, 15 s) | ${pgbench_tps} | 15 s | $l2 → $l3 |
| **QueueBox** | **$r_intake** | ${intake_s} s | $l4 → $l5 |
| **ratio to the pgbench floor / to the raw consumer floor** | **$(ratio "$r_intake" "$pgbench_tps") / $(ratio "$r_intake" "$r_consume")** | | |
| the inbox table's ceiling (one \`INSERT … SELECT\` of $messages server-made rows, no client) | $r_ceiling | ${ceiling_s} s | |
| ratio to the table's ceiling | $(ratio "$r_intake" "$r_ceiling") | | |

QueueBox: rows stored $intake_rows in $intake_inserts insert transactions; the consumer afterwards: $intake_left; idle RSS $(mb "$intake_idle_kb") MB, peak RSS $(mb "$intake_peak_kb") MB; CPU time $intake_cpu s; warnings and errors logged $intake_warn.

### Delivery: $messages outbox rows published

| | messages/s | time | load before → after |
|---|---|---|---|
| raw publisher floor (async-nats, JetStream publish, $concurrency in flight, each waiting for its acknowledgement, no database) | $r_publish | ${publish_s} s | $l6 → $l7 |
| SQL floor (\`qb-sql-floor\`: claim + mark, no delivery) | $r_sql | ${sql_s} s | $l8 → $l9 |
| **QueueBox** | **$r_delivery** | ${delivery_s} s | $l10 → $l11 |
| **ratio to the lower floor** | **$(ratio "$r_delivery" "$lower")** | | |

QueueBox: messages in the stream afterwards $delivery_seen; idle RSS $(mb "$delivery_idle_kb") MB, peak RSS $(mb "$delivery_peak_kb") MB; CPU time $delivery_cpu s; warnings and errors logged $delivery_warn.
<!-- nats-benchmark:end -->
MD
if [[ ! -f "$out" ]]; then cp "$section" "$out"
elif grep -q 'nats-benchmark:begin' "$out"; then
    awk -v file="$section" '
        /nats-benchmark:begin/ { while ((getline line < file) > 0) print line; skip = 1; next }
        /nats-benchmark:end/ { skip = 0; next }
        !skip { print }' "$out" >"$work/page" && cp "$work/page" "$out"
else
    { echo; cat "$section"; } >>"$out"
fi
say "wrote the NATS section of $out"
cat "$section"
