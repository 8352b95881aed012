#!/usr/bin/env bash
# Runs the three libFuzzer targets (store file, callback URL, lease record) for a bounded time each (FUZZ_SECONDS, default 60) and fails on a
# crash. The seed corpora live in Fuzz/corpus/; findings go to fuzz-out/ (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${FUZZ_SECONDS:-60}"
bash scripts/fuzz-store.sh "$seconds"
bash scripts/fuzz-callback.sh "$seconds"
bash scripts/fuzz-lease.sh "$seconds"
