#!/usr/bin/env bash
# Runs a command with a wall-clock bound, so a hung test run fails with a thread dump instead of
# sitting until CI's own limit.
#
#   scripts/with-watchdog.sh <seconds> <command> [arguments...]
#
# Every suite has a swift-testing time limit, which names a hung test; but a test stuck in a
# wait that ignores cancellation keeps the run alive after the limit fires. Past <seconds>, this
# prints every thread of each running test process (gdb, when installed), kills the command and
# exits 124.
set -uo pipefail

limit="$1"
shift
"$@" &
child=$!

(
  # Killed when the command ends first: then nothing is printed.
  sleep "$limit" || exit 0
  echo "with-watchdog: '$*' ran past ${limit} s; thread dumps follow" >&2
  for pid in $(pgrep -f 'PackageTests\.xctest' || true); do
    echo "--- process $pid: $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" >&2
    if command -v gdb >/dev/null 2>&1; then
      timeout 60 gdb -p "$pid" -batch -ex 'thread apply all bt 30' 2>&1 | grep -v '^\[' >&2
    fi
  done
  pkill -KILL -P "$child" 2>/dev/null
  kill -KILL "$child" 2>/dev/null
) &
watchdog=$!

wait "$child"
status=$?
kill "$watchdog" 2>/dev/null
pkill -P "$watchdog" 2>/dev/null
wait "$watchdog" 2>/dev/null
# A killed child reports 137; say 124, as timeout(1) does.
if [ "$status" -eq 137 ]; then exit 124; fi
exit "$status"
