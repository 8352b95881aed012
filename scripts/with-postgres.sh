#!/usr/bin/env bash
# Runs a command beside a throwaway PostgreSQL server, and always stops the server after it.
#
#   scripts/with-postgres.sh swift test --package-path Integrations/PostgreSQL
#   scripts/with-postgres.sh swift run --package-path Integrations/PostgreSQL fleet-demo
#
# The server is initdb'd into a new temporary directory (as the `postgres` user when run as
# root, else as you), listens on 127.0.0.1 only, on a free port, with `trust` authentication
# for local connections, and is deleted afterwards. The command gets its address as
# AUTHCOORD_PG_CONNINFO (a libpq connection string). Needs the server binaries (Debian:
# `apt-get install postgresql libpq-dev`); set PG_BIN to their directory if they are not
# found under /usr/lib/postgresql/*/bin or on PATH.
set -euo pipefail
[ "$#" -ge 1 ] || { echo "usage: $0 <command> [arguments...]" >&2; exit 2; }

if [ -z "${PG_BIN:-}" ]; then
  PG_BIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1 || true)"
  [ -n "$PG_BIN" ] || PG_BIN="$(dirname "$(command -v initdb 2>/dev/null || echo /nonexistent/initdb)")"
fi
[ -x "$PG_BIN/initdb" ] && [ -x "$PG_BIN/pg_ctl" ] || {
  echo "with-postgres: no initdb/pg_ctl (install postgresql, or set PG_BIN)" >&2
  exit 2
}

as_owner() {
  if [ "$(id -u)" -eq 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

dir="$(mktemp -d /tmp/authcoord-pg.XXXXXX)"
[ "$(id -u)" -ne 0 ] || chown postgres "$dir"
port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"

stop() {
  as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap stop EXIT
trap 'exit 130' INT TERM

as_owner "$PG_BIN/initdb" -D "$dir/data" -U postgres --auth=trust -E UTF8 --no-sync \
  >"$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
# Enough connections for a fleet test: 16 replicas × (4 pooled + 1 listener) and the tests'.
as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 \
  -o "-c listen_addresses=127.0.0.1 -c port=$port -c unix_socket_directories=$dir -c max_connections=200 -c fsync=off" \
  start >/dev/null || { cat "$dir/server.log" >&2; exit 1; }

export AUTHCOORD_PG_CONNINFO="host=127.0.0.1 port=$port dbname=postgres user=postgres"
# For the tests that restart the server mid-run (they run only when asked to:
# AUTHCOORD_PG_RESTART_TESTS=1, alone, since a restart breaks every other test's connections).
owner=""
[ "$(id -u)" -ne 0 ] || owner="runuser -u postgres --"
export AUTHCOORD_PG_RESTART="$owner $PG_BIN/pg_ctl -D $dir/data -l $dir/server.log -w -t 60 -m immediate restart"
echo "with-postgres: PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$port" >&2
set +e
"$@"
status=$?
set -e
exit "$status"
