#!/usr/bin/env bash
# A rotation soak of a PostgreSQL fleet while its sessions are ended at random: the numbers in
# "Running a fleet on PostgreSQL" (the fault table). Run it beside a throwaway server:
#
#   bash scripts/with-postgres.sh bash scripts/pg-terminate-soak.sh [seconds] [kill-every-s]
#
# Starts `fleet-demo --soak-seconds` (4 replicas × 40 callers, 800 ms tokens; the identity
# provider is SIMULATED) and, until it ends, ends one client session picked at random every
# 0.5 s with `pg_terminate_backend`. Exits with fleet-demo's status: 0 only with no
# refresh-token reuse and no failed call. A session ended during a call fails that call (by
# design: whether its statement ran is unknown), so a rare failure here is not a defect by
# itself; a reuse is.
set -euo pipefail
: "${AUTHCOORD_PG_CONNINFO:?run beside scripts/with-postgres.sh}"
seconds="${1:-45}"
every="${2:-0.5}"
swift build --package-path Integrations/PostgreSQL --product fleet-demo >/dev/null
bin="$(swift build --package-path Integrations/PostgreSQL --show-bin-path)/fleet-demo"
"$bin" --replicas 4 --callers 40 --soak-seconds "$seconds" --lifetime-ms 800 --ttl-ms 1000 &
fleet=$!
ended=0
while kill -0 "$fleet" 2>/dev/null; do
  sleep "$every"
  n="$(psql "$AUTHCOORD_PG_CONNINFO" -qtAc "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
    FROM (SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'
          AND pid <> pg_backend_pid() ORDER BY random() LIMIT 1) s" 2>/dev/null || echo 0)"
  ended=$((ended + n))
done
status=0
wait "$fleet" || status=$?
echo "pg-terminate-soak: $ended sessions ended; fleet-demo exited $status"
exit "$status"
