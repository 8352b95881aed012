#!/usr/bin/env bash
# Fuzzes the lease-file decoder (LeaseRecord.decode) with libFuzzer and AddressSanitizer.
#
#   scripts/fuzz-lease.sh [seconds]     (default 60)
#
# Compiles Fuzz/LeaseRecord/main.swift with the TokenStore sources the lease record needs (it is
# not part of `swift build`), then runs it for at most `seconds`, starting from the seed corpus in
# Fuzz/corpus/lease. New interesting inputs go to fuzz-out/lease/corpus (git-ignored), a crashing
# input to fuzz-out/lease/artifacts/. Exits non-zero when the fuzzer finds a crash, a leak or a
# timeout. Environment: FUZZ_OUT (output directory).
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${FUZZ_OUT:-$root/fuzz-out/lease}"
mkdir -p "$out/corpus" "$out/artifacts"

sources=(
  "$root/Fuzz/LeaseRecord/main.swift"
  "$root/Sources/TokenStore/FileAuthorizationLease+Record.swift"
  "$root/Sources/TokenStore/FileAuthorizationLease+RecordCoding.swift"
  "$root/Sources/TokenStore/FileAuthorizationLease+History.swift"
  "$root/Sources/TokenStore/HostClock.swift"
  "$root/Sources/TokenStore/AuthorizationLease.swift"
  "$root/Sources/TokenStore/LeaseGrants.swift"
  "$root/Sources/TokenStore/SignOutGenerations.swift"
  "$root/Sources/TokenStore/LeaseChangeFeed.swift"
  "$root/Sources/TokenStore/Duration+Seconds.swift"
  "$root/Sources/TokenStore/StableCode.swift"
  "$root/Sources/TokenStore/TokenStoreError.swift"
  "$root/Sources/TokenStore/AuthModel.swift"
  "$root/Sources/TokenStore/AccountKey.swift"
  "$root/Sources/TokenStore/PlantedBug.swift"
)

echo "fuzz-lease: compiling the lease-record fuzzer" >&2
swiftc -sanitize=fuzzer,address -parse-as-library -O -g \
  -package-name AuthCoordinator -module-name LeaseRecordFuzz \
  "${sources[@]}" -o "$out/lease-record-fuzzer"

echo "fuzz-lease: fuzzing for ${seconds}s" >&2
# Swift's own crash backtracer trips AddressSanitizer; let libFuzzer and ASan report instead.
export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=no}"
"$out/lease-record-fuzzer" "$out/corpus" "$root/Fuzz/corpus/lease" \
  -max_total_time="$seconds" \
  -max_len=8192 \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -artifact_prefix="$out/artifacts/" \
  -print_final_stats=1
