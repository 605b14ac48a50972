#!/usr/bin/env bash
# The demo: two processes talk RDMA through softverbs, with no NIC, no kernel
# module and no root. First our own small verbs program (softverbs_demo.c),
# then Debian's unmodified ibv_rc_pingpong.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
export LD_LIBRARY_PATH=$build/lib
port=${PORT:-19555}

echo "== softverbs_demo: server and client processes (LD_LIBRARY_PATH=$LD_LIBRARY_PATH)"
"$build/bin/softverbs_demo" server "$port" &
server=$!
"$build/bin/softverbs_demo" client "$port"
wait "$server"

echo
gid=$("$root/tests/e2e/loopback_gid.sh")
echo "== Debian's ibv_rc_pingpong, unmodified, -g $gid (::ffff:127.0.0.1), data checked with -c"
ibv_rc_pingpong -p $((port + 1)) -g "$gid" -c -n 10000 -s 64 > /tmp/softverbs-demo-server.$$ 2>&1 &
server=$!
sleep 0.3
ibv_rc_pingpong -p $((port + 1)) -g "$gid" -c -n 10000 -s 64 127.0.0.1
wait "$server"
sed 's/^/[server] /' /tmp/softverbs-demo-server.$$
rm -f /tmp/softverbs-demo-server.$$
