#!/usr/bin/env bash
# Builds and tests the TypeScript pull client against PostgreSQL, SQLite (better-sqlite3) and
# MariaDB (mysql2).
# Env: QUEUEBOX_TEST_PG_URL (default postgres://postgres:test@127.0.0.1:5432/test),
# QUEUEBOX_TEST_MYSQL_URL (default mysql://root@127.0.0.1:3306).
# Last line: "typescript: N passed, M failed[, K skipped]". Exit status: non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")"
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

status=0
# npm ci only when node_modules is missing or older than the lock file: better-sqlite3 compiles
# its native module from source here (no prebuilt binary can be downloaded), which takes minutes.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  if ! npm ci --no-audit --no-fund --prefer-offline >"$log" 2>&1; then
    cat "$log"; echo "typescript: 0 passed, 1 failed"; exit 1
  fi
fi
if ! npm run --silent build >"$log" 2>&1; then
  cat "$log"; echo "typescript: 0 passed, 1 failed"; exit 1
fi
node --test --test-concurrency=2 --test-timeout=240000 dist/test/ 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

pass=$(grep -E '^# pass [0-9]+' "$log" | tail -1 | awk '{print $3}')
fail=$(grep -E '^# fail [0-9]+' "$log" | tail -1 | awk '{print $3}')
skip=$(grep -E '^# skipped [0-9]+' "$log" | tail -1 | awk '{print $3}')
pass=${pass:-0}; fail=${fail:-0}; skip=${skip:-0}
if [ "$status" -ne 0 ] && [ "$fail" -eq 0 ]; then fail=1; fi
if [ "$skip" -gt 0 ]; then
  echo "typescript: ${pass} passed, ${fail} failed, ${skip} skipped"
else
  echo "typescript: ${pass} passed, ${fail} failed"
fi
exit "$status"
