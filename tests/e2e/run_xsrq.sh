#!/usr/bin/env bash
# Runs Debian's ibv_xsrq_pingpong (XRC: one domain, named by the file
# /tmp/xrc_domain, shared by every process) as a server for N clients and N
# client processes, on the GID of ::ffff:127.0.0.1. All must exit 0 and
# report success.
#   run_xsrq.sh PORT CLIENTS [ARGS...]      (ARGS for every process)
set -u
source "$(dirname "$0")/../common/tcp_port.sh"
port=$1 clients=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
gid=$("$here/../common/loopback_gid.sh") && [ -n "$gid" ] || { echo "no ::ffff:127.0.0.1 GID"; exit 1; }
out=$(mktemp -d)
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done; rm -rf "$out"' EXIT

"$(dirname "$0")/with_stacks.sh" 60 ibv_xsrq_pingpong -p "$port" -g "$gid" -c "$clients" "$@" >"$out/server" 2>&1 &
server=$!
pids+=("$server")
wait_tcp_port "$port" 10 "$server"
for i in $(seq "$clients"); do
  "$(dirname "$0")/with_stacks.sh" 50 ibv_xsrq_pingpong -p "$port" -g "$gid" "$@" 127.0.0.1 >"$out/client$i" 2>&1 &
  pids+=("$!")
done
ok=1
for p in "${pids[@]}"; do wait "$p" || ok=0; done
pids=()
for f in "$out"/*; do
  echo "--- $(basename "$f")"; cat "$f"
  grep -q '^success' "$f" || ok=0
done
[ $ok -eq 1 ]
