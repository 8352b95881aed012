#!/usr/bin/env bash
# Fuzzes the Alipay callback-URL parser with libFuzzer + AddressSanitizer.
#
#   scripts/fuzz-callback.sh [seconds]     (default 60)
#
# Compiles the parser sources from Sources/AlipayBridge together with Fuzz/CallbackParser, on top
# of the core's error type (no SwiftPM), runs for at most the given time on a copy of the seed
# corpus Fuzz/corpus/callback, and exits non-zero when the fuzzer finds a crash (the reproducer
# lands in fuzz-out/). Needs a Linux toolchain with libFuzzer (swift.org toolchains have it).
set -euo pipefail

seconds="${1:-60}"
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$root/fuzz-out"
mkdir -p "$out/corpus"
cp -n "$root"/Fuzz/corpus/callback/* "$out/corpus/" 2>/dev/null || true

# The parser sources import AuthCoordinator for its error type: that module is built first from
# the core's AuthCoordinatorError.swift and URLRedaction.swift alone (with a stand-in AccountKey), then the parsers and
# the fuzz target are compiled against it. Both are instrumented.
core_sources=(
  "$root/Sources/TokenStore/StableCode.swift"
  "$root/Sources/AuthCoordinator/AuthCoordinatorError.swift"
  "$root/Sources/AuthCoordinator/URLRedaction.swift"
  "$root/Fuzz/CallbackParser/Core/Stubs.swift"
)
bridge="$root/Sources/AlipayBridge"
sources=(
  "$bridge/AlipayErrorCodes.swift"
  "$bridge/SafepayResultStatus.swift"
  "$bridge/SafepayCallback.swift"
  "$bridge/InsideResult.swift"
  "$bridge/AlipayURLClassification.swift"
  "$root/Fuzz/CallbackParser/Stubs.swift"
  "$root/Fuzz/CallbackParser/main.swift"
)
modules="$out/modules"
rm -rf "$modules"
mkdir -p "$modules"

echo "compiling fuzz target..."
swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -O -g \
  -package-name AuthCoordinator -module-name AuthCoordinator "${core_sources[@]}" \
  -emit-module -emit-module-path "$modules/AuthCoordinator.swiftmodule" \
  -emit-library -static -o "$modules/libAuthCoordinator.a" 2> "$out/build.log" \
  || { cat "$out/build.log"; exit 2; }
swiftc -sanitize=fuzzer,address -parse-as-library -swift-version 6 -O -g \
  -package-name AuthCoordinator -module-name CallbackParserFuzz -I "$modules" \
  "${sources[@]}" "$modules/libAuthCoordinator.a" -o "$out/callback-fuzzer" 2>> "$out/build.log" \
  || { cat "$out/build.log"; exit 2; }

echo "fuzzing for ${seconds}s (corpus: $out/corpus)..."
set +e
# The Swift runtime backtracer would hold the pipe open after a crash; libFuzzer reports.
SWIFT_BACKTRACE=enable=no "$out/callback-fuzzer" "$out/corpus" \
  -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$out/" -print_final_stats=1 2>&1 | tee "$out/fuzz.log" | grep -E \
  "^#[0-9]+[[:space:]]+(INITED|DONE)|ERROR|SUMMARY|Fatal|precondition|stat::"
status="${PIPESTATUS[0]}"
set -e
if [ "$status" -ne 0 ]; then
  echo "fuzzer failed (exit $status); see $out/fuzz.log and the crash-* files in $out/" >&2
  exit "$status"
fi
echo "no crash in ${seconds}s"
