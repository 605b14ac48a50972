#!/usr/bin/env bash
# Runs one of Debian's pingpong tools as server and client (two processes)
# over softverbs, on the GID of ::ffff:127.0.0.1. Both must exit 0 and both
# must report their iterations.
#   run_pair.sh PORT TOOL [ARGS...]
set -u
port=$1 tool=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
gid=$("$here/../common/loopback_gid.sh") && [ -n "$gid" ] || { echo "no ::ffff:127.0.0.1 GID"; exit 1; }
. "$here/server_client.sh"
run_server_client 100 "$port" "$tool" -p "$port" -g "$gid" "$@" || exit 1
grep -q "iters in" "$out/client" && grep -q "iters in" "$out/server"
