#!/usr/bin/env bash
# What the host service (softverbs-hostd) costs (issue 36's goals). RoCEv2
# between two network namespaces on a veth: each process owning its own
# traffic (no service), against a service in each namespace with the
# kernel steering datagrams to processes (tools/hostd/kernel_steering.h),
# and against the service handing every datagram on itself
# (--no-steering, where BPF is refused); and on one host with the service,
# two users' processes (RoCEv2 datagrams through the shared-memory rings
# the service sets up between them, shm/peer_ring.h) against one user's
# network path between the namespaces and one user's two processes (shared
# memory). Alternating, ROUNDS rounds; prints
# Markdown tables of medians and of the medians of per-round ratios.
#   bench/hostd_ab.sh [BUILD_DIR] [ROUNDS]
# Needs root (namespaces, the service, and user nobody for the second user).
set -u
build=${1:-build}
rounds=${2:-3}
export LD_LIBRARY_PATH=$(cd "$build/lib" && pwd)
hostd=$(cd "$build/bin" && pwd)/softverbs-hostd
pids=()
source "$(dirname "$0")/netns_pair.sh"
netns_pair_at_exit='kill "${pids[@]}" 2>/dev/null'
netns_pair 10.95.9

nobody=(setpriv --reuid=nobody --regid=nogroup --clear-groups)

# perftest SERVER_NS CLIENT_NS SERVER_USER_PREFIX... -- ARGS: the client's result line
perftest() {
  local sns=$1 cns=$2 sgid=$3 cgid=$4 sas=$5
  shift 5
  local -a as=()
  [[ $sas == nobody ]] && as=("${nobody[@]}")
  ip netns exec "$sns" "${as[@]}" timeout 120 "$@" -x "$sgid" >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  ip netns exec "$cns" timeout 120 "$@" -x "$cgid" 10.95.9.1 2>/dev/null | awk '/^ *[0-9]+ +[0-9]+ / {print; exit}'
  wait $server
}
bw() { perftest "$@" ib_write_bw -s 1048576 -D 3 | awk '{print $4}'; }   # MB/s
lat() { perftest "$@" ib_write_lat -s 8 -n 20000 | awk '{print $5}'; }   # t_typical, us
services() {  # start [ARGS] | stop: the service in both namespaces
  if [[ $1 == start ]]; then
    shift
    for ns in "$a" "$b"; do ip netns exec "$ns" "$hostd" "$@" 2>/dev/null & pids+=($!); done
    sleep 0.3
  else
    kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null; pids=()
  fi
}
declare -A v
for r in $(seq "$rounds"); do
  v[bw_direct]+=" $(bw "$a" "$b" "$ga" "$gb" root)"
  v[lat_direct]+=" $(lat "$a" "$b" "$ga" "$gb" root)"
  services start
  v[bw_hostd]+=" $(bw "$a" "$b" "$ga" "$gb" root)"
  v[lat_hostd]+=" $(lat "$a" "$b" "$ga" "$gb" root)"
  # One host (A), two users vs one user in shared memory.
  v[bw_users]+=" $(bw "$a" "$a" "$ga" "$ga" nobody)"
  v[lat_users]+=" $(lat "$a" "$a" "$ga" "$ga" nobody)"
  v[bw_shm]+=" $(bw "$a" "$a" "$ga" "$ga" root)"
  v[lat_shm]+=" $(lat "$a" "$a" "$ga" "$ga" root)"
  services stop
  services start --no-steering
  v[bw_fwd]+=" $(bw "$a" "$b" "$ga" "$gb" root)"
  v[lat_fwd]+=" $(lat "$a" "$b" "$ga" "$gb" root)"
  v[bw_users_fwd]+=" $(bw "$a" "$a" "$ga" "$ga" nobody)"
  v[lat_users_fwd]+=" $(lat "$a" "$a" "$ga" "$ga" nobody)"
  services stop
done
python3 - "${v[bw_direct]}" "${v[bw_hostd]}" "${v[lat_direct]}" "${v[lat_hostd]}" \
  "${v[bw_users]}" "${v[bw_shm]}" "${v[lat_users]}" "${v[lat_shm]}" \
  "${v[bw_fwd]}" "${v[lat_fwd]}" "${v[bw_users_fwd]}" "${v[lat_users_fwd]}" <<'PY'
import statistics, sys
def nums(s): return [float(x) for x in s.split()] or [float("nan")]
bd, bh, ld, lh, bu, bs, lu, ls, bf, lf, buf, luf = map(nums, sys.argv[1:13])
med = statistics.median
def ratio(x, y): return med([a / b for a, b in zip(x, y)])
print("Between two hosts (namespaces on a veth, MTU 1500), root on both:")
print()
print("| figure | without service | with service, kernel steering | ratio | service forwarding (--no-steering) | ratio |")
print("|---|---|---|---|---|---|")
print(f"| ib_write_bw -s 1M, MB/s | {med(bd):.0f} | {med(bh):.0f} | {ratio(bh, bd):.2f}x | {med(bf):.0f} | {ratio(bf, bd):.2f}x |")
print(f"| ib_write_lat -s 8, us | {med(ld):.2f} | {med(lh):.2f} | {ratio(lh, ld):.2f}x | {med(lf):.2f} | {ratio(lf, ld):.2f}x |")
print()
print("Two users of one host (nobody's server, root's client) with the service, against one user:")
print()
print("| figure | two users, rings (kernel steering) | two users, rings (service forwarding) | one user's network path (between the hosts, no service) | one user, shared memory |")
print("|---|---|---|---|---|")
print(f"| ib_write_bw -s 1M, MB/s | {med(bu):.0f} | {med(buf):.0f} | {med(bd):.0f} | {med(bs):.0f} |")
print(f"| ib_write_lat -s 8, us | {med(lu):.2f} ({ratio(lu, ld):.2f}x the network path) | {med(luf):.2f} ({ratio(luf, ld):.2f}x) | {med(ld):.2f} | {med(ls):.2f} |")
PY
