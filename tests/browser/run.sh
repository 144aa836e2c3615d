#!/usr/bin/env bash
# The console browser suite: builds the queuebox binary, installs playwright-core (no browser
# download) into tests/browser/node_modules (git-ignored), uses Debian's Chromium (installs it
# with apt-get when missing and running as root), and runs console.test.mjs.
# Last line: "console: N passed, M failed". Exit status: non-zero on any failure.
set -uo pipefail
cd "$(dirname "$0")"
root=$(cd ../.. && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$HOME/.cache/queuebox/target}
log=$(mktemp)
trap 'rm -f "$log"' EXIT
fail() { cat "$log"; echo "console: 0 passed, 1 failed"; exit 1; }

if [ ! -x "${CHROMIUM:-/usr/bin/chromium}" ]; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y chromium) >"$log" 2>&1 || fail
  else
    echo "tests/browser: Debian's chromium is missing (apt-get install chromium)" >"$log"; fail
  fi
fi
if [ ! -d node_modules/playwright-core ] || [ package.json -nt node_modules/.package-lock.json ]; then
  PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund >"$log" 2>&1 || fail
fi
(cd "$root" && cargo build --quiet -p queuebox --bin queuebox) >"$log" 2>&1 || fail
export QUEUEBOX_BIN="$CARGO_TARGET_DIR/debug/queuebox"
export QUEUEBOX_SCREENSHOTS="$root/target/console"
node --test --test-timeout=180000 console.test.mjs 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
pass=$(grep -E '^# pass [0-9]+' "$log" | tail -1 | awk '{print $3}')
failed=$(grep -E '^# fail [0-9]+' "$log" | tail -1 | awk '{print $3}')
pass=${pass:-0}; failed=${failed:-0}
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "console: ${pass} passed, ${failed} failed"
exit "$status"
