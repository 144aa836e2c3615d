#!/usr/bin/env bash
# Makes sure every server the tests use is up on loopback: starts it when it is installed but
# stopped, installs it with apt when it is missing and we run as root. Exits non-zero, naming
# the server, when one cannot be brought up, so a test never passes without its server.
#
# Usage: scripts/services.sh [postgres] ...   (no argument: every server the tests use today)
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

status=0
wanted=("$@")
[ ${#wanted[@]} -gt 0 ] || wanted=(postgres)
for service in "${wanted[@]}"; do
    case "$service" in
        postgres) ensure_postgres || { log "PostgreSQL is not available on 127.0.0.1:5432"; status=1; } ;;
        *) log "unknown service $service"; status=1 ;;
    esac
done
exit $status
