#!/usr/bin/env bash
# One local user opens more connections to the host service than its file
# limit allows (issue 36): with the 1024 open files a systemd unit starts
# with, 1100 connections from user daemon used to leave the service
# spinning at its file limit and every new RDMA process of the host, root's
# ibv_devinfo too, blocked in connect() for good. Now the service takes at
# most a fair share from one user (hostd/connection_budget.h), tells the
# rest why and closes them, and never spins:
#  1. daemon's flood: some connections taken, the rest refused, none left
#     waiting;
#  2. meanwhile root's ibv_devinfo answers, and an ibv_rc_pingpong between
#     nobody and root (whose processes the service serves) completes;
#  3. the service uses little CPU while the flood holds its connections;
#  4. a process of the flooding user is refused with a clear error.
# $1: softverbs-hostd, $2: hostd_probe.
set -u
hostd=${1:?softverbs-hostd} probe=${2:?hostd_probe}
. "$(dirname "$0")/hostd_host.sh"
need_users || exit
n=svcf$$
out=$(mktemp -d)
chmod 777 "$out"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; ip netns del "$n" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT
make_host 10.98.1 || exit
cp "$probe" "$out/probe" && chmod 755 "$out/probe"
mkdir -m 700 "$out/rt-root" "$out/rt-nobody" "$out/rt-daemon" && chown nobody "$out/rt-nobody" &&
  chown daemon "$out/rt-daemon" || exit 1
# The file limit of a systemd unit's start (soft and hard here: the service
# cannot raise it).
service_nofile=1024 start_service "$out/hostd" -v || exit 1
fail=0

ip netns exec "$n" "${as_daemon[@]}" "$out/probe" connections 1100 120 >"$out/flood" 2>&1 &
flood=$!
pids+=($flood)
for _ in $(seq 100); do grep -q "^connections:" "$out/flood" && break; sleep 0.1; done
cat "$out/flood"
read -r made refused not_made < <(sed -nE 's/^connections: ([0-9]+) made, ([0-9]+) refused by the service, ([0-9]+) not made/\1 \2 \3/p' "$out/flood")
((${refused:-0} > 0 && ${made:-0} > 0)) || { echo "FAIL: the flood was not cut at a share ($out/flood)"; fail=1; }
((${not_made:-1} == 0)) || { echo "FAIL: $not_made connections were left waiting"; fail=1; }

# 2. Others are still served, while the flood holds its connections.
t0=$(cpu_ticks "$service_pid")
if ! ip netns exec "$n" env SOFTVERBS_RUNTIME_DIR="$out/rt-root" timeout 20 ibv_devinfo >"$out/devinfo" 2>&1; then
  echo "FAIL: root's ibv_devinfo did not answer while daemon's connections were held"; cat "$out/devinfo"; fail=1
fi
ip netns exec "$n" env SOFTVERBS_RUNTIME_DIR="$out/rt-nobody" "${as_nobody[@]}" timeout 30 \
  ibv_rc_pingpong -g "$gid" -p 18620 -n 200 >"$out/pp.server" 2>&1 &
server=$!
sleep 0.5
ip netns exec "$n" env SOFTVERBS_RUNTIME_DIR="$out/rt-root" timeout 30 \
  ibv_rc_pingpong -g "$gid" -p 18620 -n 200 10.98.1.1 >"$out/pp.client" 2>&1
crc=$?
wait $server
src=$?
echo "--- pingpong between nobody and root during the flood: server exit $src, client exit $crc"
((src == 0 && crc == 0)) || { echo "FAIL: a pair of other users failed during the flood"; tail -n 3 "$out/pp.server" "$out/pp.client"; fail=1; }

# 4. The flooding user's own process: refused, and told why (it fails at
# once instead of waiting for its peer).
ip netns exec "$n" env SOFTVERBS_RUNTIME_DIR="$out/rt-daemon" "${as_daemon[@]}" timeout 10 \
  ibv_rc_pingpong -g "$gid" -p 18621 >"$out/daemon.pp" 2>&1
grep -h "refused this process" "$out/daemon.pp" ||
  { echo "FAIL: the flooding user's process was not told why it was refused"; cat "$out/daemon.pp"; fail=1; }

# 3. The service does not spin: over 3 s of held connections, little CPU.
sleep 3
t1=$(cpu_ticks "$service_pid")
hz=$(getconf CLK_TCK)
echo "service CPU while the flood holds: $((t1 - t0)) ticks in ~4 s ($hz per second)"
(((t1 - t0) < hz)) || { echo "FAIL: the service spun ($((t1 - t0)) ticks)"; fail=1; }
kill $flood 2>/dev/null
wait $flood 2>/dev/null
grep -h "refused a connection" "$out/hostd" | tail -1
exit $fail
