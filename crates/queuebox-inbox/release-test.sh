#!/usr/bin/env bash
# Tests queuebox-inbox the way a user gets it, not from inside the workspace:
#   1. `cargo package` builds the crate from its packaged files alone (what crates.io would get);
#   2. a fresh application adds the dependency the README shows (a git dependency on
#      https://github.com/alternayte/queuebox), builds the README example unchanged and runs it
#      against PostgreSQL until the example's row is processed, then stops it with SIGINT.
# Offline: git sends the README's URL to a snapshot of this checkout
# (clients/install-test/local-remote.sh), cargo fetches it with the git CLI, and the crates.io
# dependencies come from the local registry cache that the workspace build filled.
# Env: QUEUEBOX_TEST_PG_URL (default postgres://postgres:test@127.0.0.1:5432/postgres).
# Last line: "rustclient: N passed, M failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/queuebox/target}
export CARGO_TERM_COLOR=never
pg_url=${QUEUEBOX_TEST_PG_URL:-postgres://postgres:test@127.0.0.1:5432/postgres}
work=$(mktemp -d "${TMPDIR:-/tmp}/queuebox-rust-release.XXXXXX")
schema=qb_rs_release_$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
child=
cleanup() {
  [ -n "$child" ] && kill "$child" 2>/dev/null
  psql -q "$pg_url" -c "DROP SCHEMA IF EXISTS \"$schema\" CASCADE" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
passed=0
failed=0
# check NAME COMMAND...: runs one check, its output kept in a log shown only on failure.
check() {
  local name=$1 log=$work/$1.log
  shift
  if "$@" >"$log" 2>&1; then
    echo "rustclient: ok: $name"
    passed=$((passed + 1))
  else
    cat "$log"
    echo "rustclient: FAILED: $name"
    failed=$((failed + 1))
  fi
}

package() {
  cd "$repo" && cargo package -p queuebox-inbox --allow-dirty --offline
}

# The README's dependency lines: the one ```toml block of the README.
readme_dependencies() {
  sed -n '/^```toml$/,/^```$/p' "$here/README.md" | sed '1d;$d'
}

readme_example_runs() {
  local remote=$work/remote app=$work/app
  mkdir -p "$remote" && sh "$repo/clients/install-test/local-remote.sh" "$remote" || return 1
  export GIT_CONFIG_GLOBAL=$remote/gitconfig CARGO_NET_GIT_FETCH_WITH_CLI=true
  cargo new --quiet --vcs none --name readme-app "$app" || return 1
  cp "$here/examples/readme.rs" "$app/src/main.rs"
  local deps
  deps=$(readme_dependencies)
  grep -q 'git = "https://github.com/alternayte/queuebox"' <<<"$deps" || {
    echo "the README's toml block has no git dependency on https://github.com/alternayte/queuebox"
    return 1
  }
  # cargo --offline cannot fetch a git dependency, and without --offline it would update the
  # crates.io index over the network. So the registry crates are locked first, offline, with the
  # same crate as a path dependency (same manifest, same dependencies); then the README's lines
  # replace it, and cargo, with its HTTP sent to a closed port, fetches only the git source.
  cp "$app/Cargo.toml" "$app/Cargo.toml.new"
  sed "s|git = \"https://github.com/alternayte/queuebox\"|path = \"$here\"|" <<<"$deps" >>"$app/Cargo.toml"
  (cd "$app" && cargo generate-lockfile --offline) || return 1
  mv "$app/Cargo.toml.new" "$app/Cargo.toml"
  echo "$deps" >>"$app/Cargo.toml"
  (cd "$app" && CARGO_HTTP_PROXY=http://127.0.0.1:9 cargo build --quiet) || return 1
  grep -q 'source = "git+https://github.com/alternayte/queuebox#' "$app/Cargo.lock" || {
    echo "queuebox-inbox did not come from the git dependency"
    return 1
  }

  # A fresh schema with the inbox table and app_rows, one row for the example's source.
  sed -e "s/{schema}/$schema/g" -e 's/{\([a-z_][a-z_]*\)}/\1/g' "$repo/clients/contract/fixtures/postgresql.sql" |
    psql -q -v ON_ERROR_STOP=1 "$pg_url" >/dev/null || return 1
  local id
  id=$(psql -qtA -v ON_ERROR_STOP=1 "$pg_url" -c "INSERT INTO \"$schema\".inbox (source, idempotency_key, consumption, payload, scheduled_at)
      VALUES ('orders', 'order-1', 'pull', '{}', now() - interval '1 second') RETURNING id") || return 1
  local url=${pg_url%%\?*}
  DATABASE_URL="$url?options=-c%20search_path%3D$schema" "$CARGO_TARGET_DIR/debug/readme-app" &
  child=$!
  local state= i
  for i in $(seq 200); do
    state=$(psql -qtA "$pg_url" -c "SELECT state FROM \"$schema\".inbox WHERE id = '$id'")
    [ "$state" = processed ] && break
    sleep 0.1
  done
  kill -INT "$child"
  wait "$child"
  local status=$?
  child=
  [ "$state" = processed ] || { echo "the example's row is $state, not processed"; return 1; }
  [ "$status" = 0 ] || { echo "the example exited with $status after SIGINT"; return 1; }
  local rows
  rows=$(psql -qtA "$pg_url" -c "SELECT count(*) FROM \"$schema\".app_rows WHERE message_id = '$id'")
  [ "$rows" = 1 ] || { echo "$rows application rows, want 1"; return 1; }
}

check cargo-package package
check readme-example-runs readme_example_runs
echo "rustclient: $passed passed, $failed failed"
[ "$failed" = 0 ]
