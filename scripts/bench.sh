#!/usr/bin/env bash
# Runs the full benchmark (release build) and records its results:
#   Benchmarks/results/latest.json  every repetition, medians, targets, machine
#   docs/benchmarks.svg             cost per waiter vs N, drawn by the benchmark
# The text report goes to stdout, progress to stderr. Extra arguments are passed on
# (for example --quick, or --scenario B2). Set SCRATCH_PATH to choose the build directory.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch="${SCRATCH_PATH:-.build}"
swift build -c release --scratch-path "$scratch" --product authcoord-bench
exec swift run -c release --skip-build --scratch-path "$scratch" authcoord-bench \
  --json Benchmarks/results/latest.json --svg docs/benchmarks.svg "$@"
