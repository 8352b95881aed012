#!/usr/bin/env bash
# Builds the service quick start (Examples/ServiceQuickstart, a package of its own that depends
# on this one by path) and runs it against the SIMULATED rotating token server
# (Tests/Support/RotatingTokenServer, python3 standard library, 127.0.0.1 only): a cold start,
# 100 expiries, a slow endpoint and a revocation storm (about 2.5 minutes). Fails unless every
# phase met its expectations.
set -euo pipefail
cd "$(dirname "$0")/.."

example=Examples/ServiceQuickstart

# Build first, so that the server's hard timeout does not run during the build.
swift build --package-path "$example" -c debug --product service-quickstart

workdir="$(mktemp -d)"
server_pid=""
cleanup() {
  # Closing the server's stdin stops it; the kill is for a server that does not notice.
  exec 3>&- 2>/dev/null || true
  if [ -n "$server_pid" ]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$workdir"
}
trap cleanup EXIT

# The server serves until its stdin closes: give it a fifo that this script holds open on fd 3.
mkfifo "$workdir/stdin"
ROTATING_TOKEN_SERVER_TIMEOUT=600 python3 Tests/Support/RotatingTokenServer/rotating_token_server.py \
  <"$workdir/stdin" >"$workdir/port" &
server_pid=$!
exec 3>"$workdir/stdin"

port=""
for _ in $(seq 1 100); do
  port="$(head -n 1 "$workdir/port" 2>/dev/null || true)"
  [ -n "$port" ] && break
  kill -0 "$server_pid" 2>/dev/null || { echo "the token server exited before printing its port"; exit 1; }
  sleep 0.1
done
[[ "$port" =~ ^[0-9]+$ ]] || { echo "the token server printed no port"; exit 1; }
echo "simulated token server on 127.0.0.1:$port"

start=$SECONDS
set +e
swift run --package-path "$example" -c debug service-quickstart "http://127.0.0.1:$port"
status=$?
set -e
echo "service-quickstart exited $status after $((SECONDS - start)) s"
exit "$status"
