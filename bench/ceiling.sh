# Sourced by the broker benchmark scripts (bench/kafka.sh, nats.sh, rabbitmq.sh): what
# PostgreSQL itself can store into QueueBox's inbox table on this machine, with no client work at
# all. A broker's raw consumer floor has no database; these floors have nothing but the
# database, so an intake aim above them cannot be met by any relay that stores each message
# before it acknowledges it.
#
# Both take the server URL (no query string) and a schema that holds a migrated inbox table; they
# empty the table after themselves. The rows are made by the server: about 190-byte JSON
# payloads as the benchmarks send, distinct keys, every index and constraint of the table.

ceiling_rows() { # N: the SELECT that makes N rows
    echo "SELECT gen_random_uuid(), 'ceiling', 'm-' || txid_current() || '-' || g, json_build_object('id', 'm-' || g, 'n', g, 'pad', repeat('x', 150))::jsonb, '{}'::jsonb, 'push', 'pending' FROM generate_series(1, $1) g"
}
ceiling_insert="INSERT INTO inbox (id, source, idempotency_key, payload, headers, consumption, state)"

# inbox_ceiling URL SCHEMA N: the seconds one INSERT ... SELECT of N rows takes (one statement,
# one transaction): the most rows a second this table takes here, by any writer.
inbox_ceiling() {
    local out
    out="$(PGOPTIONS="-c search_path=$2" psql "$1" -qtAX -c '\timing on' \
        -c "$ceiling_insert $(ceiling_rows "$3")" -c 'TRUNCATE inbox')"
    sed -nE 's/^Time: ([0-9.]+) ms.*/\1/p' <<<"$out" | head -1 | awk '{ printf "%.3f", $1 / 1000 }'
}

# inbox_sequential_tps URL SCHEMA ROWS SECONDS PGBENCH: transactions a second of one pgbench
# client that inserts ROWS rows a transaction, one transaction after the other (what one Kafka
# partition allows: a poll's records in one insert, and the next poll after it).
inbox_sequential_tps() {
    local script out
    script="$(mktemp /tmp/qb-ceiling-XXXX.sql)"
    echo "$ceiling_insert $(ceiling_rows "$3") ON CONFLICT DO NOTHING;" >"$script"
    out="$(PGOPTIONS="-c search_path=$2" "$5" -n -c 1 -T "$4" -f "$script" "$1" 2>&1)"
    rm -f "$script"
    PGOPTIONS="-c search_path=$2" psql "$1" -qtAX -c 'TRUNCATE inbox' >/dev/null
    sed -nE 's/^tps = ([0-9.]+).*/\1/p' <<<"$out" | head -1
}
