#!/usr/bin/env bash
# The RabbitMQ benchmarks (docs/benchmarks.md, "RabbitMQ"): builds the release `queuebox` and the
# bench binaries, then, against the local PostgreSQL (postgres://postgres@127.0.0.1:5432/test) and
# the local RabbitMQ (amqp://guest:guest@127.0.0.1:5672/%2f), in this order:
#
#   intake
#     1. raw consumer floor: qb-amqp-floor (lapin, manual ack, the same prefetch) drains N messages
#     2. pgbench floor: single-row INSERT ... ON CONFLICT DO NOTHING, as many clients as the prefetch
#     3. QueueBox: a push rabbitmq source (relay off) drains N messages already in the queue
#     3a. the inbox table's ceiling, no client (bench/ceiling.sh): one INSERT ... SELECT of N rows
#   delivery
#     4. raw publisher floor: qb-amqp-floor publishes N messages, one in flight per channel on
#        outbox.concurrency confirm-mode channels (QueueBox's acknowledgement mode)
#     5. SQL floor: qb-sql-floor (QueueBox's claim + mark statements, no delivery) on N rows
#     6. QueueBox: N outbox rows published to an exchange bound to a queue
#
# and rewrites the RabbitMQ section of docs/benchmarks.md (nothing else on the page).
#
#   bench/rabbitmq.sh                          # the documented run
#   bench/rabbitmq.sh --messages 5000 --out /tmp/b.md   # a quick try
#
# Options: --messages N (100000), --prefetch N (50), --concurrency N (8), --out FILE.
# QUEUEBOX_BENCH_BIN_DIR=DIR runs the queuebox, qb-amqp-floor and qb-sql-floor already in DIR.
# Not part of scripts/test.sh: benchmarks are never timed tests.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')}"
pg_url="${QUEUEBOX_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
amqp_url="${QUEUEBOX_BENCH_AMQP_URL:-amqp://guest:guest@127.0.0.1:5672/%2f}"
messages=100000 prefetch=50 concurrency=8 out="docs/benchmarks.md"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --messages) messages="$2"; shift 2 ;;
        --prefetch) prefetch="$2"; shift 2 ;;
        --concurrency) concurrency="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "rabbitmq.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

load() { cut -d' ' -f1-3 /proc/loadavg; }
say() { echo "rabbitmq.sh: $* (load $(load))" >&2; }
die() { echo "rabbitmq.sh: $*" >&2; exit 1; }

pgbench="$(ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -1 || true)"
[[ -n "$pgbench" ]] || pgbench="$(command -v pgbench || true)"
[[ -n "$pgbench" ]] || die "pgbench is missing (apt-get install -y postgresql-contrib)"
scripts/services.sh postgres rabbitmq || die "PostgreSQL or RabbitMQ is not up"
python="$(scripts/pyenv.sh)"
pika() { "$python" crates/queuebox-amqp/tests/support/pika_client.py "$amqp_url" "$@"; }

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
        --bin queuebox --bin qb-amqp-floor --bin qb-sql-floor
    bin_dir="$target/$profile"
fi
work="$(mktemp -d /tmp/qb-rabbitmq-bench-XXXX)"
# Copies: other builds in a shared target directory may overwrite the originals meanwhile.
cp "$bin_dir/queuebox" "$bin_dir/qb-amqp-floor" "$bin_dir/qb-sql-floor" "$work/"
trap 'rm -rf "$work"' EXIT
qb="$work/queuebox" floor="$work/qb-amqp-floor" sqlfloor="$work/qb-sql-floor"
export QUEUEBOX_BENCH_AMQP_URL="$amqp_url"

source bench/facts.sh
source bench/wait.sh
source bench/ceiling.sh
load_start="$(load)"
run_id="$$"
queue="qb_bench_in_$run_id" exchange="qb_bench_out_$run_id" seen="qb_bench_seen_$run_id"

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
printf '{"queues":[{"name":"%s"}]}' "$queue" | pika declare

say "intake 1: raw consumer floor"
"$floor" fill "$queue" "$messages" >/dev/null
l0="$(load)"
floor_consume="$("$floor" consume "$queue" "$messages" "$prefetch")"
l1="$(load)"
consume_s="${floor_consume##*seconds=}"

say "intake 2: pgbench floor"
new_schema qb_bench_pgbench
psql "$(schema_url qb_bench_pgbench)" -qX -c "CREATE TABLE t (k text PRIMARY KEY, payload jsonb NOT NULL)"
echo "INSERT INTO t VALUES (md5(random()::text || clock_timestamp()::text), '{\"id\":1}') ON CONFLICT DO NOTHING;" >"$work/insert.sql"
l2="$(load)"
pgbench_out="$(PGOPTIONS='-c search_path=qb_bench_pgbench' "$pgbench" -n -c "$prefetch" -j 2 -T 15 -f "$work/insert.sql" "$pg_url" 2>&1)"
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
    type: rabbitmq
    connectionUrl: "$amqp_url"
    queueName: $queue
    prefetchCount: $prefetch
destinations:
  sink:
    type: log
    file: /dev/null
routes:
  - topicPattern: "**"
    destination: sink
YAML
start_qb "$work/intake.yml" "$work/intake-idle.log"
sleep 3
intake_idle_kb="$(rss "$qb_pid" VmRSS)"
stop_qb
"$floor" fill "$queue" "$messages" >/dev/null
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
intake_left="$(pika count "$queue" | sed -nE 's/.*"messages": ([0-9]+).*/\1/p')"
intake_warn="$(warnings "$work/intake.log")"
say "intake 3a: the inbox table's ceiling"
count_in qb_bench_intake 'TRUNCATE inbox' >/dev/null
ceiling_s="$(inbox_ceiling "$pg_url" qb_bench_intake "$messages")"
say "intake: the inbox table's ceiling $(rate "$messages" "$ceiling_s")/s"
psql_q "DROP SCHEMA qb_bench_intake CASCADE" >/dev/null
printf '{"queues":["%s"]}' "$queue" | pika delete

# --- delivery -----------------------------------------------------------------------------------
printf '{"exchanges":[{"name":"%s","type":"topic"}],"queues":[{"name":"%s","bind":[{"exchange":"%s","key":"#"}]}]}' \
    "$exchange" "$seen" "$exchange" | pika declare

say "delivery 4: raw publisher floor"
l6="$(load)"
floor_publish="$("$floor" publish "$exchange" "$messages" "$concurrency")"
l7="$(load)"
publish_s="${floor_publish##*seconds=}"
printf '{"queues":["%s"]}' "$seen" | pika delete
printf '{"queues":[{"name":"%s","bind":[{"exchange":"%s","key":"#"}]}]}' "$seen" "$exchange" | pika declare

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
    type: rabbitmq
    url: "$amqp_url"
    exchange: $exchange
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
delivery_seen="$(pika count "$seen" | sed -nE 's/.*"messages": ([0-9]+).*/\1/p')"
delivery_warn="$(warnings "$work/delivery.log")"
psql_q "DROP SCHEMA qb_bench_delivery CASCADE" >/dev/null
printf '{"queues":["%s"],"exchanges":["%s"]}' "$seen" "$exchange" | pika delete
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
rabbit_version="$(rabbitmqctl version 2>/dev/null || echo unknown)"
pg_version="$(psql_q 'SHOW server_version')"
section="$work/section.md"
cat >"$section" <<MD
<!-- rabbitmq-benchmark:begin: written by bench/rabbitmq.sh; edits inside are overwritten -->
## RabbitMQ: intake and delivery

Command: \`bench/rabbitmq.sh\` (the phases are listed at the top of the script).

- Run: $date_run UTC, commit $commit.
- Machine: $cores cores ($cpu_model), $(printf '%.1f' "$mem_gb") GB memory; the load averages (1, 5, 15 min) beside each phase say how busy it was.
- RabbitMQ $rabbit_version and PostgreSQL $pg_version on the same machine (127.0.0.1), untuned, default settings.
- Messages: $messages persistent JSON bodies of about 190 bytes (\`{"id":"m-<i>","n":<i>,"pad":"x…"}\`), each with its own id.
- QueueBox: the release build. Intake: one push \`rabbitmq\` source, \`prefetchCount\` $prefetch, the relay off (\`inbox.relay.enabled: false\`), the messages already in the queue; measured from the start of the process to the last row committed (the start-up, about 0.1 s, is inside). Delivery: one \`rabbitmq\` destination (topic exchange bound to one queue), \`outbox.concurrency\` $concurrency, the rows inserted and analyzed before the start; measured from the start of the process to the last row \`sent\`.
- Memory in MB of 10^6 bytes. Idle RSS: \`VmRSS\` 3 s after \`QueueBox started\` with nothing to do. Peak RSS: \`VmHWM\` when the last row was written.
- Load average at the start of the run: $load_start; at the end: $load_end.

### Intake: $messages messages from the queue into the inbox

| | messages/s | time | load before → after |
|---|---|---|---|
| raw consumer floor (lapin, manual ack, prefetch $prefetch, no database) | $r_consume | ${consume_s} s | $l0 → $l1 |
| pgbench floor (single-row \`INSERT … ON CONFLICT DO NOTHING\`, $prefetch clients, 15 s) | ${pgbench_tps} | 15 s | $l2 → $l3 |
| **QueueBox** | **$r_intake** | ${intake_s} s | $l4 → $l5 |
| **ratio to the pgbench floor / to the raw consumer floor** | **$(ratio "$r_intake" "$pgbench_tps") / $(ratio "$r_intake" "$r_consume")** | | |
| the inbox table's ceiling (one \`INSERT … SELECT\` of $messages server-made rows, no client) | $r_ceiling | ${ceiling_s} s | |
| ratio to the table's ceiling | $(ratio "$r_intake" "$r_ceiling") | | |

QueueBox: rows stored $intake_rows in $intake_inserts insert transactions; left in the queue afterwards $intake_left; idle RSS $(mb "$intake_idle_kb") MB, peak RSS $(mb "$intake_peak_kb") MB; CPU time $intake_cpu s; warnings and errors logged $intake_warn.

### Delivery: $messages outbox rows published

| | messages/s | time | load before → after |
|---|---|---|---|
| raw publisher floor (lapin, $concurrency confirm-mode channels, one message in flight each, no database) | $r_publish | ${publish_s} s | $l6 → $l7 |
| SQL floor (\`qb-sql-floor\`: claim + mark, no delivery) | $r_sql | ${sql_s} s | $l8 → $l9 |
| **QueueBox** | **$r_delivery** | ${delivery_s} s | $l10 → $l11 |
| **ratio to the lower floor** | **$(ratio "$r_delivery" "$lower")** | | |

QueueBox: messages in the bound queue afterwards $delivery_seen; idle RSS $(mb "$delivery_idle_kb") MB, peak RSS $(mb "$delivery_peak_kb") MB; CPU time $delivery_cpu s; warnings and errors logged $delivery_warn.
<!-- rabbitmq-benchmark:end -->
MD
if [[ ! -f "$out" ]]; then cp "$section" "$out"
elif grep -q 'rabbitmq-benchmark:begin' "$out"; then
    awk -v file="$section" '
        /rabbitmq-benchmark:begin/ { while ((getline line < file) > 0) print line; skip = 1; next }
        /rabbitmq-benchmark:end/ { skip = 0; next }
        !skip { print }' "$out" >"$work/page" && cp "$work/page" "$out"
else
    { echo; cat "$section"; } >>"$out"
fi
say "wrote the RabbitMQ section of $out"
cat "$section"
