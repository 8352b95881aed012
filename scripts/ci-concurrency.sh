#!/usr/bin/env bash
# Runs the ConcurrencyTests target under ThreadSanitizer, scaled down so it stays fast.
#
#   scripts/ci-concurrency.sh
#
# Environment (all optional):
#   STRESS_OPS        stress operations under TSan (default 50000; the plain run does 100000)
#   STRESS_SEED       replay a seed printed by an earlier run
#   FANIN_CALLERS     fan-in callers under TSan (default 50000; half as many again cancel)
#   SCRATCH_PATH      build directory (default /tmp/build-stress-tsan)
# No suppressions are used: the library's lock is a pthread mutex, which TSan understands.
# If one is ever needed, put it in scripts/tsan-suppressions.txt, one commented line each, and
# it is passed through TSAN_OPTIONS below.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
scratch="${SCRATCH_PATH:-$root/.build/tsan}"
export STRESS_OPS="${STRESS_OPS:-50000}"
export FANIN_CALLERS="${FANIN_CALLERS:-50000}"
tsan_options="halt_on_error=1 second_deadlock_stack=1"
if [ -f "$root/scripts/tsan-suppressions.txt" ]; then
  tsan_options="$tsan_options suppressions=$root/scripts/tsan-suppressions.txt"
fi
export TSAN_OPTIONS="${TSAN_OPTIONS:-$tsan_options}"

cd "$root"
start=$SECONDS
echo "ci-concurrency: building with -sanitize=thread ($scratch)"
swift build --build-tests --scratch-path "$scratch" --sanitize=thread
built=$SECONDS
echo "ci-concurrency: build took $((built - start)) s"

echo "ci-concurrency: ConcurrencyTests under TSan, STRESS_OPS=$STRESS_OPS" \
  "FANIN_CALLERS=$FANIN_CALLERS TSAN_OPTIONS=$TSAN_OPTIONS"
log="$(mktemp)"
set +e
swift test --skip-build --scratch-path "$scratch" --sanitize=thread \
  --filter ConcurrencyTests 2>&1 | tee "$log"
status="${PIPESTATUS[0]}"
set -e
echo "ci-concurrency: tests took $((SECONDS - built)) s (total $((SECONDS - start)) s)"
if grep -q "WARNING: ThreadSanitizer" "$log"; then
  echo "ci-concurrency: ThreadSanitizer reported a problem (see above)" >&2
  status=1
fi
rm -f "$log"
exit "$status"
