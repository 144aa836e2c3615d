#!/usr/bin/env bash
# The cost of a transform (docs/benchmarks.md, "Transforms"): in one run, on one machine,
#   1. outbox drain of N rows without a transform, then the same N rows with a 10-field route
#      transform (docs/transforms.md's partner mapping), each through the release binary to
#      qb-receiver;
#   2. webhook intake with wrk for S seconds into an `http` source without a transform, then
#      into one with a 10-field source transform.
# Prints the figures with the load average beside each; the caller copies them into the page.
# Usage: bench/transforms.sh [--rows N] [--seconds S] [--connections C]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# The target directory of ~/.cargo/config.toml and scripts/test.sh.
target="${CARGO_TARGET_DIR:-$HOME/.cache/queuebox/target}"
pg_url="${QUEUEBOX_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
rows=20000 seconds=10 connections=32
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rows) rows="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        *) echo "transforms.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
scripts/services.sh wrk >/dev/null || { echo "transforms.sh: wrk is missing and could not be installed (apt-get install -y wrk)" >&2; exit 1; }

cargo build --release --quiet -p queuebox -p queuebox-bench
queuebox="$target/release/queuebox"
receiver="$target/release/qb-receiver"
schema="qb_bench_trf_$$"
work="$(mktemp -d "${TMPDIR:-/tmp}/qb-trf-bench-$$.XXXX")"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    sleep 0.5
    for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    psql "$pg_url" -qAtX -c "DROP SCHEMA IF EXISTS $schema CASCADE" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
load() { cut -d' ' -f1-3 /proc/loadavg; }
sq() { PGOPTIONS="-c search_path=$schema" psql "$pg_url" -qAtX -v ON_ERROR_STOP=1 "$@"; }
db_url="$pg_url?sslmode=disable&options=-c%20search_path%3D$schema"

route_transform='{"orderId": id, "customer": customer.name, "email": $lowercase(customer.email), "country": $uppercase(address.country), "items": $count(lines), "total": $sum(lines.(qty * price)), "currency": currency, "express": shipping = "express", "attempt": $attempt, "messageId": $messageId}'
source_transform='{"id": id, "type": type, "seq": data.seq, "customer": data.customer, "amount": data.amount, "currency": data.currency, "note": data.note, "source": $source, "key": $idempotencyKey, "at": $timestamp}'

config() { # receiver port, route transform ('' for none)
    cat <<EOF
database:
  url: "$db_url"
  poolSize: 16
server:
  httpPort: 0
outbox:
  pollIntervalMs: 20
  batchSize: 100
  concurrency: 64
sources:
  plain:
    path: /plain
    idempotencyKeyPath: \$.id
    consumption: pull
  mapped:
    path: /mapped
    idempotencyKeyPath: \$.id
    consumption: pull
    transform:
      expression: '$source_transform'
destinations:
  receiver:
    type: http
    baseUrl: http://127.0.0.1:$1
routes:
  - topicPattern: "**"
    destination: receiver
EOF
    if [[ -n "$2" ]]; then
        printf '    transform:\n      expression: %s\n' "'$2'"
    fi
}

start() { # config file, log file; sets qb_pid qb_port
    "$queuebox" run --config "$1" </dev/null >/dev/null 2>"$2" &
    qb_pid=$!
    pids+=("$qb_pid")
    for _ in $(seq 1 300); do
        if grep -q 'QueueBox started' "$2"; then
            qb_port="$(grep 'QueueBox started' "$2" | grep -o '"httpPort":[0-9]*' | cut -d: -f2)"
            return 0
        fi
        sleep 0.1
    done
    echo "transforms.sh: queuebox did not start: $(tail -3 "$2")" >&2
    exit 1
}

psql "$pg_url" -qAtX -v ON_ERROR_STOP=1 -c "CREATE SCHEMA $schema" >/dev/null
config 9 "" >"$work/migrate.yml"
"$queuebox" migrate --config "$work/migrate.yml" >"$work/migrate.log" 2>&1

drain() { # label, route transform
    sq -c "TRUNCATE outbox" >/dev/null
    sq -c "INSERT INTO outbox (topic, key, payload)
        SELECT 'order.created', 'k' || (n % 64), json_build_object(
            'id', 'o-' || n, 'customer', json_build_object('name', 'Ada ' || n, 'email', 'ADA' || n || '@EXAMPLE.COM'),
            'address', json_build_object('country', 'de'),
            'lines', json_build_array(json_build_object('qty', 2, 'price', 3), json_build_object('qty', 1, 'price', n % 100)),
            'currency', 'EUR', 'shipping', CASE WHEN n % 2 = 0 THEN 'express' ELSE 'standard' END)::jsonb
        FROM generate_series(1, $rows) AS n" >/dev/null
    "$receiver" --out "$work/$1.csv" --expect "$rows" >"$work/$1.port" 2>"$work/$1.receiver.log" &
    local rpid=$!
    pids+=("$rpid")
    local port=""
    for _ in $(seq 1 100); do
        port="$(grep -o 'port=[0-9]*' "$work/$1.port" | head -1 | cut -d= -f2 || true)"
        [[ -n "$port" ]] && break
        sleep 0.05
    done
    config "$port" "$2" >"$work/$1.yml"
    local before; before="$(load)"
    local t0; t0=$(date +%s.%N)
    start "$work/$1.yml" "$work/$1.log"
    wait "$rpid"
    local t1; t1=$(date +%s.%N)
    local sent; sent="$(sq -c "SELECT count(*) FROM outbox WHERE state = 'sent'")"
    kill -TERM "$qb_pid"; wait "$qb_pid" || true
    awk -v l="$1" -v n="$rows" -v a="$t0" -v b="$t1" -v s="$sent" -v ld="$before" -v la="$(load)" \
        'BEGIN { printf "drain %s: %d rows in %.2f s = %.0f rows/s (%d sent when the receiver had them all; load %s before, %s after)\n", l, n, b - a, n / (b - a), s, ld, la }'
}

intake() { # label (the source path)
    cat >"$work/wrk.lua" <<'EOF'
local threads, next_tid = {}, 0
function setup(thread) next_tid = next_tid + 1; thread:set("tid", next_tid) end
local counter, headers, pad = 0, { ["Content-Type"] = "application/json" }, string.rep("x", 80)
function request()
    counter = counter + 1
    local body = '{"id":"w' .. tid .. '-' .. counter .. '","type":"bench.webhook",'
        .. '"data":{"seq":' .. counter .. ',"customer":"c' .. (counter % 1000) .. '",'
        .. '"amount":1234,"currency":"EUR","note":"' .. pad .. '"}}'
    return wrk.format("POST", nil, headers, body)
end
EOF
    local before; before="$(load)"
    wrk --latency -t2 -c"$connections" -d"${seconds}s" -s "$work/wrk.lua" "http://127.0.0.1:$qb_port/inbox/$1" >"$work/$1.wrk" 2>&1
    local stored; stored="$(sq -c "SELECT count(*) FROM inbox WHERE source = '$1'")"
    local rps; rps="$(grep 'Requests/sec' "$work/$1.wrk" | awk '{print $2}')"
    local lat; lat="$(grep -A3 'Latency Distribution' "$work/$1.wrk" | tr -s ' ' | tr '\n' ' ' || true)"
    [[ -n "$lat" ]] || lat="$(grep 'Latency' "$work/$1.wrk" | head -1 | tr -s ' ')"
    echo "intake $1: $rps requests/s over ${seconds} s, $connections connections, $stored rows stored; $lat (load $before before, $(load) after)"
}

echo "transforms.sh: $(nproc) cores, $(git rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC')"
drain without ""
drain with-route-transform "$route_transform"
config 9 "" >"$work/intake.yml"
start "$work/intake.yml" "$work/intake.log"
intake plain
intake mapped
kill -TERM "$qb_pid"; wait "$qb_pid" || true
