#!/usr/bin/env bash
# Runs the full benchmark (release build) and records its results:
#   Benchmarks/results/latest.json  every repetition, medians, targets, machine
#   docs/benchmarks.svg             cost per waiter vs N, drawn by the benchmark
# The text report goes to stdout, progress to stderr. Extra arguments are passed on
# (for example --quick, or --scenario B2). The benchmark is the sibling package Benchmarks/.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --package-path Benchmarks --product authcoord-bench
exec "$(swift build -c release --package-path Benchmarks --show-bin-path)/authcoord-bench" \
  --json Benchmarks/results/latest.json --svg docs/benchmarks.svg "$@"
