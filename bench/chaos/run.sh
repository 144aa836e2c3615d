#!/usr/bin/env bash
# The chaos ledger test (issue 17; docs/reliability.md). Builds the binary, then runs
# bench/chaos/chaos.py with the given arguments (--short: the minute-long form of
# scripts/test.sh; without it, the full run). Needs PostgreSQL's initdb/pg_ctl/psql and the
# postgres system user (the private cluster runs as that user; initdb refuses root).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/queuebox/target}
profile=${CHAOS_PROFILE:-debug}
if [ "$profile" = release ]; then
    cargo build --quiet --release -p queuebox --bin queuebox
else
    cargo build --quiet -p queuebox --bin queuebox
fi
# A bound on the whole run, so a hang cannot hold the test suite.
limit=${CHAOS_TIMEOUT:-3600}
case " $* " in *" --short "*) limit=${CHAOS_TIMEOUT:-300} ;; esac
exec timeout --signal=TERM --kill-after=30 "$limit" \
    python3 bench/chaos/chaos.py --binary "$CARGO_TARGET_DIR/$profile/queuebox" "$@"
