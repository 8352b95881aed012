#!/usr/bin/env bash
# A rotation soak of a PostgreSQL fleet through a database fault: the numbers in "Running a
# fleet on PostgreSQL" (its fault table). Run it beside a throwaway server:
#
#   bash scripts/with-postgres.sh bash scripts/pg-fault-soak.sh terminate [seconds]
#   bash scripts/with-postgres.sh bash scripts/pg-fault-soak.sh outage [seconds] [down-seconds]
#
# Starts `fleet-demo --soak-seconds` (4 replicas × 40 callers, 800 ms tokens, 1 s lease time to
# live; the identity provider is SIMULATED) and meanwhile:
#   terminate  ends one client session picked at random every 0.5 s (`pg_terminate_backend`);
#   outage     stops the server 12 s in, for `down-seconds` (default 6), then starts it again.
# Prints fleet-demo's report (each replica's failed calls and its last failure's time) and
# exits with its status: 0 only with no refresh-token reuse and no failed call. An outage
# fails calls by design (an expired token cannot be refreshed without the database), and so
# does a session ended during a call (whether its statement ran is unknown); a reuse is a
# defect in any mode.
set -euo pipefail
: "${AUTHCOORD_PG_CONNINFO:?run beside scripts/with-postgres.sh}"
mode="${1:-terminate}"
seconds="${2:-45}"
down="${3:-6}"
case "$mode" in terminate | outage) ;; *) echo "usage: $0 terminate|outage [seconds] [down]" >&2; exit 2 ;; esac
swift build --package-path Integrations/PostgreSQL --product fleet-demo >/dev/null
bin="$(swift build --package-path Integrations/PostgreSQL --show-bin-path)/fleet-demo"
"$bin" --replicas 4 --callers 40 --soak-seconds "$seconds" --lifetime-ms 800 --ttl-ms 1000 &
fleet=$!
if [ "$mode" = terminate ]; then
  ended=0
  while kill -0 "$fleet" 2>/dev/null; do
    sleep 0.5
    n="$(psql "$AUTHCOORD_PG_CONNINFO" -qtAc "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
      FROM (SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend'
            AND pid <> pg_backend_pid() ORDER BY random() LIMIT 1) s" 2>/dev/null || echo 0)"
    ended=$((ended + n))
  done
  echo "pg-fault-soak: $ended sessions ended"
else
  # with-postgres.sh's restart command, split into a stop and a start with the same options.
  : "${AUTHCOORD_PG_RESTART:?run beside scripts/with-postgres.sh}"
  data="$(grep -oE -- '-D [^ ]+' <<<"$AUTHCOORD_PG_RESTART" | head -1 | cut -c4-)"
  options="$(sed -E 's/^[^ ]+ "-D" "[^"]+" //; s/"//g' "$data/postmaster.opts")"
  sleep 12
  ${AUTHCOORD_PG_RESTART/ restart/ stop} >/dev/null
  echo "pg-fault-soak: server stopped at $(date +%T)"
  sleep "$down"
  start="${AUTHCOORD_PG_RESTART/ restart/ start}"
  ${start/-m immediate/} -o "$options" >/dev/null
  echo "pg-fault-soak: server started at $(date +%T)"
fi
status=0
wait "$fleet" || status=$?
echo "pg-fault-soak: fleet-demo exited $status"
exit "$status"
