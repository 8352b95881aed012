#!/usr/bin/env bash
# Benchmark B9: M replica processes × N callers on one PostgreSQL database, M = 2, 6 and 16,
# with the listener's LISTEN/NOTIFY and with polling only. Prints, per configuration, the
# medians over REPS runs of: authorizations (must be 1), callers' latency p50 / p99, and the
# time from the end of the authorization to the last caller served fleet-wide (the wake-up).
#   scripts/with-postgres.sh bash scripts/bench-fleet.sh        (REPS=5 CALLERS=200 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
reps="${REPS:-5}"
callers="${CALLERS:-200}"
swift build --package-path Integrations/PostgreSQL -c release --product fleet-demo >/dev/null
demo="$(swift build --package-path Integrations/PostgreSQL -c release --show-bin-path)/fleet-demo"
printf '%-9s %-7s %-15s %-10s %-10s %-12s\n' replicas wakeup authorizations p50_ms p99_ms wakeup_ms
for replicas in 2 6 16; do
  for mode in notify poll; do
    flag=""
    [ "$mode" = poll ] && flag="--poll-only"
    runs=()
    for _ in $(seq "$reps"); do
      runs+=("$("$demo" --replicas "$replicas" --callers "$callers" --delay-ms 300 --json $flag)")
    done
    printf '%s\n' "${runs[@]}" | python3 -c '
import json, statistics, sys
rows = [json.loads(line) for line in sys.stdin if line.strip()]
med = lambda key: statistics.median(r[key] for r in rows)
auth = sorted(set(r["authorizations"] for r in rows))
print("%-9s %-7s %-15s %-10.1f %-10.1f %-12.1f" % (sys.argv[1], sys.argv[2], ",".join(map(str, auth)),
      med("latencyP50"), med("latencyP99"), 1000 * med("lastServedAfterAuthorization")))
ok = all(r["ok"] for r in rows)
sys.exit(0 if ok else 1)' "$replicas" "$mode"
  done
done
