#!/usr/bin/env bash
# The cost of webhook verification and signing (docs/benchmarks.md, "Webhooks"): in one run, on
# one machine, side by side:
#   1. webhook intake with wrk for S seconds into an `http` source without auth, then into one
#      with `auth.type: standard-webhooks`, both fed the same pre-signed requests (unique
#      webhook-id and body each, signed by a Python stdlib HMAC before the run, so wrk's Lua does
#      no crypto); the QueueBox process's CPU time per request is read from /proc beside the rate;
#   2. outbox drain of N rows to qb-receiver without `signing`, then the same N rows with
#      `signing: standard-webhooks` (two secrets, as during a rotation: two signatures a request).
# Prints the figures with the load average beside each; the caller copies them into the page.
# Usage: bench/webhooks.sh [--rows N] [--seconds S] [--connections C]
# Not part of scripts/test.sh: benchmarks are never timed tests.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
target="${CARGO_TARGET_DIR:-$HOME/.cache/queuebox/target}"
pg_url="${QUEUEBOX_BENCH_PG_URL:-postgres://postgres@127.0.0.1:5432/test}"
rows=10000 seconds=10 connections=32
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rows) rows="$2"; shift 2 ;;
        --seconds) seconds="$2"; shift 2 ;;
        --connections) connections="$2"; shift 2 ;;
        -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
        *) echo "webhooks.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done
scripts/services.sh wrk >/dev/null || { echo "webhooks.sh: wrk is missing and could not be installed (apt-get install -y wrk)" >&2; exit 1; }

cargo build --release --quiet -p queuebox -p queuebox-bench
queuebox="$target/release/queuebox"
receiver="$target/release/qb-receiver"
schema="qb_bench_wh_$$"
work="$(mktemp -d "${TMPDIR:-/tmp}/qb-wh-bench-$$.XXXX")"
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
cpu_s() { awk -v t="$(getconf CLK_TCK)" '{ sub(/^.*\) /, ""); printf "%.2f\n", ($12 + $13) / t }' "/proc/$1/stat"; }
sq() { PGOPTIONS="-c search_path=$schema" psql "$pg_url" -qAtX -v ON_ERROR_STOP=1 "$@"; }
db_url="$pg_url?sslmode=disable&options=-c%20search_path%3D$schema"

# A fixed test secret (whsec_ + base64 of 24 bytes); the second one is the "previous" secret of a
# rotation on the delivery side.
secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
secret_old="whsec_QWxsIHRoZSBzZWNyZXRzIGFyZSBmYWtlISE="

config() { # receiver port, signing ('' for none)
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
    idempotencyKeyHeader: webhook-id
    consumption: pull
  signed:
    path: /signed
    consumption: pull
    auth:
      type: standard-webhooks
      secret: "$secret"
destinations:
  receiver:
    type: http
    baseUrl: http://127.0.0.1:$1
EOF
    if [[ -n "$2" ]]; then
        printf '    signing:\n      type: standard-webhooks\n      secret:\n        - "%s"\n        - "%s"\n' \
            "$secret" "$secret_old"
    fi
    cat <<EOF
routes:
  - topicPattern: "**"
    destination: receiver
EOF
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
    echo "webhooks.sh: queuebox did not start: $(tail -3 "$2")" >&2
    exit 1
}

psql "$pg_url" -qAtX -v ON_ERROR_STOP=1 -c "CREATE SCHEMA $schema" >/dev/null
config 9 "" >"$work/migrate.yml"
"$queuebox" migrate --config "$work/migrate.yml" >"$work/migrate.log" 2>&1

drain() { # label, signing ('' for none)
    sq -c "TRUNCATE outbox" >/dev/null
    sq -c "INSERT INTO outbox (topic, key, payload)
        SELECT 'order.created', 'k' || (n % 64), json_build_object(
            'id', 'o-' || n, 'type', 'order.created', 'amount', n % 1000, 'currency', 'EUR',
            'note', repeat('x', 80))::jsonb
        FROM generate_series(1, $rows) AS n" >/dev/null
    "$receiver" --out "$work/$1.csv" --expect "$rows" >"$work/$1.port" 2>"$work/$1.receiver.log" &
    local rpid=$!
    pids+=("$rpid")
    local port=""
    for _ in $(seq 1 100); do
        port="$(grep -so 'port=[0-9]*' "$work/$1.port" | head -1 | cut -d= -f2 || true)"
        [[ -n "$port" ]] && break
        sleep 0.05
    done
    config "$port" "$2" >"$work/$1.yml"
    local before; before="$(load)"
    local t0; t0=$(date +%s.%N)
    start "$work/$1.yml" "$work/$1.log"
    wait "$rpid"
    local t1; t1=$(date +%s.%N)
    local cpu; cpu="$(cpu_s "$qb_pid")"
    local sent; sent="$(sq -c "SELECT count(*) FROM outbox WHERE state = 'sent'")"
    kill -TERM "$qb_pid"; wait "$qb_pid" || true
    awk -v l="$1" -v n="$rows" -v a="$t0" -v b="$t1" -v s="$sent" -v c="$cpu" -v ld="$before" -v la="$(load)" \
        'BEGIN { printf "drain %s: %d rows in %.2f s = %.0f rows/s, queuebox CPU %.2f s = %.0f us/row (%d sent when the receiver had them all; load %s before, %s after)\n", l, n, b - a, n / (b - a), c, c * 1e6 / n, s, ld, la }'
}

# Pre-signed requests: one line per request, "webhook-id TAB timestamp TAB signature TAB body",
# signed as the Standard Webhooks specification says (HMAC-SHA256 of id.timestamp.body with the
# base64-decoded secret, base64 signature after "v1,"). Enough for the run at any rate seen on
# this machine; a request beyond them repeats one (a duplicate) and is counted apart.
presign() { # count, file
    python3 - "$1" "$2" "$secret" <<'EOF'
import base64, hashlib, hmac, sys, time
count, path, secret = int(sys.argv[1]), sys.argv[2], sys.argv[3]
key = base64.b64decode(secret[len("whsec_"):])
now = str(int(time.time()))
pad = "x" * 80
with open(path, "w") as out:
    for n in range(count):
        wid = f"msg_{n}"
        body = ('{"id":"%s","type":"bench.webhook","data":{"seq":%d,"customer":"c%d",'
                '"amount":1234,"currency":"EUR","note":"%s"}}') % (wid, n, n % 1000, pad)
        mac = hmac.new(key, f"{wid}.{now}.{body}".encode(), hashlib.sha256).digest()
        out.write(f"{wid}\t{now}\tv1,{base64.b64encode(mac).decode()}\t{body}\n")
EOF
}

cat >"$work/wrk.lua" <<'EOF'
-- Each wrk thread sends every n-th pre-signed request (n = the thread count), in order.
local next_tid, threads = 0, 2
function setup(thread) next_tid = next_tid + 1; thread:set("tid", next_tid) end
local reqs, i = {}, 0
function init(args)
    threads = tonumber(args[1])
    local n = 0
    for line in io.lines(args[2]) do
        if n % threads == tid - 1 then
            local id, ts, sig, body = line:match("^([^\t]*)\t([^\t]*)\t([^\t]*)\t(.*)$")
            reqs[#reqs + 1] = wrk.format("POST", nil, {
                ["Content-Type"] = "application/json", ["webhook-id"] = id,
                ["webhook-timestamp"] = ts, ["webhook-signature"] = sig }, body)
        end
        n = n + 1
    end
end
function request()
    i = i % #reqs + 1
    return reqs[i]
end
EOF

intake() { # label (the source path), requests file
    local before; before="$(load)"
    local cpu0; cpu0="$(cpu_s "$qb_pid")"
    wrk --latency -t2 -c"$connections" -d"${seconds}s" -s "$work/wrk.lua" \
        "http://127.0.0.1:$qb_port/inbox/$1" -- 2 "$2" >"$work/$1.wrk" 2>&1
    local cpu1; cpu1="$(cpu_s "$qb_pid")"
    local stored; stored="$(sq -c "SELECT count(*) FROM inbox WHERE source = '$1'")"
    local total; total="$(awk '/requests in/ { print $1 }' "$work/$1.wrk")"
    local non2xx; non2xx="$(awk '/Non-2xx/ { print $NF }' "$work/$1.wrk")"
    local rps; rps="$(grep 'Requests/sec' "$work/$1.wrk" | awk '{print $2}')"
    local lat; lat="$(grep -A3 'Latency Distribution' "$work/$1.wrk" | tr -s ' ' | tr '\n' ' ' || true)"
    awk -v l="$1" -v r="$rps" -v s="$seconds" -v c="$connections" -v st="$stored" -v t="$total" \
        -v bad="${non2xx:-0}" -v a="$cpu0" -v b="$cpu1" -v lat="$lat" -v ld="$before" -v la="$(load)" \
        'BEGIN { printf "intake %s: %s requests/s over %d s, %d connections, %d requests, %d non-2xx, %d rows stored; queuebox CPU %.2f s = %.0f us/request;%s (load %s before, %s after)\n", l, r, s, c, t, bad, st, b - a, (b - a) * 1e6 / t, lat, ld, la }'
}

echo "webhooks.sh: $(nproc) cores, $(git rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), load $(load)"
presign 400000 "$work/requests.tsv"
config 9 "" >"$work/intake.yml"
start "$work/intake.yml" "$work/intake.log"
intake plain "$work/requests.tsv"
intake signed "$work/requests.tsv"
kill -TERM "$qb_pid"; wait "$qb_pid" || true
drain unsigned ""
drain signed yes
