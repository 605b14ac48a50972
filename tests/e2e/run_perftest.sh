#!/usr/bin/env bash
# Runs one of Debian's perftest tools as server and client (two processes)
# over softverbs. Both must exit 0 and the client must print a results row.
#   run_perftest.sh PORT TOOL [ARGS...]      (ARGS for both sides)
set -u
port=$1 tool=$2
shift 2
out=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$out"' EXIT
timeout 150 "$tool" -d softverbs0 -p "$port" "$@" >"$out/server" 2>&1 &
server=$!
for _ in $(seq 100); do
  ss -ltn 2>/dev/null | grep -q ":$port " && break
  sleep 0.1
done
timeout 140 "$tool" -d softverbs0 -p "$port" "$@" 127.0.0.1 >"$out/client" 2>&1
client_rc=$?
if [ $client_rc -ne 0 ]; then kill $server 2>/dev/null; fi
wait $server
server_rc=$?
server=
echo "--- server ($tool $*): exit $server_rc"; cat "$out/server"
echo "--- client: exit $client_rc"; cat "$out/client"
[ $server_rc -eq 0 ] && [ $client_rc -eq 0 ] || exit 1
# A results row: the message size followed by numbers.
grep -Eq '^ *[0-9]+ +[0-9]+ +[0-9.]+' "$out/client"
