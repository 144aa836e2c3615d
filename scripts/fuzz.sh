#!/usr/bin/env bash
# Runs every cargo-fuzz target (fuzz/) for a bounded time each (issue 17). Not part of
# scripts/test.sh: the seed corpus is replayed there by crates/queuebox-fuzz's test instead.
#
#   scripts/fuzz.sh [SECONDS_PER_TARGET] [TARGET...]      (default: 60 s, every target)
#
# Needs the nightly toolchain (libFuzzer's coverage instrumentation is a nightly flag) and
# cargo-fuzz (`cargo install cargo-fuzz --locked`). New corpus entries go to fuzz/corpus/<t>/
# (git-ignored except the seed-* files); a crash leaves its input in fuzz/artifacts/<t>/ and
# stops the script with the fuzzer's exit status.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(config webhook_request intake_body jsonpath template)
fi
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
for target in "${targets[@]}"; do
  echo "== fuzz $target for ${seconds}s"
  cargo +nightly fuzz run "$target" "corpus/$target" -j 1 -- \
    -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 2>&1 | grep -E "^(#|==|stat::|INFO: (seed|-max_len))|panicked|ERROR|SUMMARY|Done" | tail -n 12
done
