#!/usr/bin/env bash
# Fuzzes the token-store file decoder with libFuzzer and AddressSanitizer.
#
#   scripts/fuzz-store.sh [seconds]     (default 60)
#
# Compiles Fuzz/StoreDecoder/main.swift with the TokenStore sources the decoder needs (it is not
# part of `swift build`), then runs it for at most `seconds`, starting from the seed corpus in
# Fuzz/corpus/store. New interesting inputs go to fuzz-out/store/corpus (git-ignored), a crashing
# input to fuzz-out/store/artifacts/. Exits non-zero when the fuzzer finds a crash, a leak or a
# timeout. Environment: FUZZ_OUT (output directory).
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
out="${FUZZ_OUT:-$root/fuzz-out/store}"
mkdir -p "$out/corpus" "$out/artifacts"

sources=(
  "$root/Fuzz/StoreDecoder/main.swift"
  "$root/Sources/TokenStore/StoreFileFormat.swift"
  "$root/Sources/TokenStore/RevokedFences.swift"
  "$root/Sources/TokenStore/CRC32.swift"
  "$root/Sources/TokenStore/StableCode.swift"
  "$root/Sources/TokenStore/TokenStoreError.swift"
  "$root/Sources/TokenStore/AuthModel.swift"
  "$root/Sources/TokenStore/AccountKey.swift"
  "$root/Sources/TokenStore/PlantedBug.swift"
)

echo "fuzz-store: compiling the decoder fuzzer" >&2
swiftc -sanitize=fuzzer,address -parse-as-library -O -g \
  -package-name AuthCoordinator -module-name StoreDecoderFuzz \
  "${sources[@]}" -o "$out/store-decoder-fuzzer"

echo "fuzz-store: fuzzing for ${seconds}s" >&2
# Swift's own crash backtracer trips AddressSanitizer; let libFuzzer and ASan report instead.
export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=no}"
"$out/store-decoder-fuzzer" "$out/corpus" "$root/Fuzz/corpus/store" \
  -max_total_time="$seconds" \
  -max_len=8192 \
  -timeout=10 \
  -rss_limit_mb=2048 \
  -artifact_prefix="$out/artifacts/" \
  -print_final_stats=1
