#!/usr/bin/env bash
# Runs one of Debian's pingpong tools as server and client (two processes)
# over softverbs, on the GID of ::ffff:127.0.0.1. Both must exit 0 and the
# client must report its iterations.
#   run_pair.sh PORT TOOL [ARGS...]
set -u
port=$1 tool=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
gid=$("$here/loopback_gid.sh") && [ -n "$gid" ] || { echo "no ::ffff:127.0.0.1 GID"; exit 1; }
out=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$out"' EXIT
timeout 100 "$tool" -p "$port" -g "$gid" "$@" >"$out/server" 2>&1 &
server=$!
# Let the server listen before the client connects.
for _ in $(seq 50); do
  ss -ltn 2>/dev/null | grep -q ":$port " && break
  sleep 0.1
done
timeout 90 "$tool" -p "$port" -g "$gid" "$@" 127.0.0.1 >"$out/client" 2>&1
client_rc=$?
if [ $client_rc -ne 0 ]; then kill $server 2>/dev/null; fi  # a lone server would wait forever
wait $server
server_rc=$?
server=
echo "--- server ($tool -g $gid $*): exit $server_rc"; cat "$out/server"
echo "--- client: exit $client_rc"; cat "$out/client"
[ $server_rc -eq 0 ] && [ $client_rc -eq 0 ] || exit 1
grep -q "iters in" "$out/client" && grep -q "iters in" "$out/server"
