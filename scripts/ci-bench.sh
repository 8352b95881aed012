#!/usr/bin/env bash
# The benchmark's CI smoke: a release build and the --quick run (< 30 s). It exits non-zero when
# an authorization count or a caller's result is wrong; slow numbers only print MISS.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product authcoord-bench
.build/release/authcoord-bench --quick --json .build/bench-quick.json
