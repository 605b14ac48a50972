#!/usr/bin/env bash
# The demo: two processes talk RDMA through softverbs, with no NIC, no kernel
# module and no root. First our own small verbs program (softverbs_demo.c),
# then Debian's unmodified ibv_rc_pingpong.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
export LD_LIBRARY_PATH=$build/lib
port=${PORT:-19555}
server=
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -f /tmp/softverbs-demo-server.$$' EXIT

wait_listening() {  # the pingpong client gives up at once if nobody listens yet
  for _ in $(seq 100); do
    ss -ltn 2>/dev/null | grep -q ":$1 " && return 0
    sleep 0.1
  done
}

echo "== softverbs_demo: server and client processes (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
"$build/bin/softverbs_demo" server "$port" &
server=$!
"$build/bin/softverbs_demo" client "$port"
wait "$server"
server=

echo
gid=$("$root/tests/common/loopback_gid.sh")
echo "== Debian's ibv_rc_pingpong, unmodified, -g $gid (::ffff:127.0.0.1), data checked with -c"
ibv_rc_pingpong -p $((port + 1)) -g "$gid" -c -n 10000 -s 64 > /tmp/softverbs-demo-server.$$ 2>&1 &
server=$!
wait_listening $((port + 1))
ibv_rc_pingpong -p $((port + 1)) -g "$gid" -c -n 10000 -s 64 127.0.0.1
wait "$server"
server=
sed 's/^/[server] /' /tmp/softverbs-demo-server.$$
