#!/usr/bin/env bash
# Runs `authcoord simulate` N times (default 200) in each mode while two `yes > /dev/null`
# processes keep both cores busy, and fails if any run is not "as expected" (exit 0 and
# "Result: as expected"), hangs (RUN_TIMEOUT seconds, default 120), or prints a timeline that
# differs from the mode's first run: time in the demo is virtual, so the output is the same on
# every run, whatever the load.
#
#   scripts/simulate-stress.sh [N]        N runs per mode
#   OTHER_RUNS=M scripts/simulate-stress.sh [N]
#                                         N runs of the default mode, M of each other mode
#   SPEEDUP=1000 scripts/simulate-stress.sh
#                                         pace the output (default 1000000: no pacing to speak of)
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-200}"
other_runs="${OTHER_RUNS:-$runs}"
speedup="${SPEEDUP:-1000000}"
run_timeout="${RUN_TIMEOUT:-120}"

swift build --product authcoord
bin="$(swift build --show-bin-path)/authcoord"
work="$(mktemp -d)"

hogs=()
cleanup() {
  for pid in "${hogs[@]}"; do kill "$pid" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
for _ in 1 2; do
  yes >/dev/null &
  hogs+=("$!")
done

failures=0
for mode in "" --never-return --return-without-authorizing --refresh-loop --logout-mid-flight; do
  count="$other_runs"
  [ -z "$mode" ] && count="$runs"
  name="${mode:-default}"
  ok=0
  start=$SECONDS
  for ((i = 1; i <= count; i++)); do
    status=0
    # shellcheck disable=SC2086 # $mode is empty or one flag
    timeout "$run_timeout" "$bin" simulate --speedup "$speedup" $mode >"$work/out" 2>&1 || status=$?
    if [ "$status" -ne 0 ] || ! grep -qx "Result: as expected" "$work/out"; then
      echo "FAIL $name run $i: exit $status" >&2
      cp "$work/out" "$work/failed-$name-$i"
      tail -20 "$work/out" >&2
      failures=$((failures + 1))
    elif [ "$i" -eq 1 ]; then
      cp "$work/out" "$work/first"
      ok=$((ok + 1))
    elif ! cmp -s "$work/out" "$work/first"; then
      echo "FAIL $name run $i: the output differs from run 1" >&2
      diff "$work/first" "$work/out" | head -20 >&2 || true
      failures=$((failures + 1))
    else
      ok=$((ok + 1))
    fi
  done
  echo "$name: $ok/$count as expected with identical output ($((SECONDS - start)) s)"
done

if [ "$failures" -ne 0 ]; then
  echo "simulate-stress: $failures failing run(s)" >&2
  exit 1
fi
echo "simulate-stress: every run as expected"
