#!/usr/bin/env bash
# What the host service (softverbs-hostd) costs: RoCEv2 between two network
# namespaces on a veth, each process owning its own traffic (no service)
# against the same with a service in each namespace (one more hop and copy
# per packet), alternating, ROUNDS rounds; and, on one host with the
# service, two users' processes (through the service, loopback UDP) against
# one user's two processes (shared memory). Prints a Markdown table of
# medians and of the medians of per-round ratios.
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
services() {  # start|stop the service in both namespaces
  if [[ $1 == start ]]; then
    for ns in "$a" "$b"; do ip netns exec "$ns" "$hostd" 2>/dev/null & pids+=($!); done
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
  # One host (A), two users through the service vs one user in shared memory.
  v[bw_users]+=" $(bw "$a" "$a" "$ga" "$ga" nobody)"
  v[lat_users]+=" $(lat "$a" "$a" "$ga" "$ga" nobody)"
  v[bw_shm]+=" $(bw "$a" "$a" "$ga" "$ga" root)"
  v[lat_shm]+=" $(lat "$a" "$a" "$ga" "$ga" root)"
  services stop
done
python3 - "${v[bw_direct]}" "${v[bw_hostd]}" "${v[lat_direct]}" "${v[lat_hostd]}" \
  "${v[bw_users]}" "${v[bw_shm]}" "${v[lat_users]}" "${v[lat_shm]}" <<'PY'
import statistics, sys
def nums(s): return [float(x) for x in s.split()]
bd, bh, ld, lh, bu, bs, lu, ls = map(nums, sys.argv[1:9])
med = statistics.median
def ratio(x, y): return med([a / b for a, b in zip(x, y)])
print("| figure | without service | with service | ratio |")
print("|---|---|---|---|")
print(f"| ib_write_bw -s 1M between namespaces, MB/s | {med(bd):.0f} | {med(bh):.0f} | {ratio(bh, bd):.2f}x |")
print(f"| ib_write_lat -s 8 between namespaces, us | {med(ld):.2f} | {med(lh):.2f} | {ratio(lh, ld):.2f}x |")
print()
print("| figure (one host, service running) | one user (shared memory) | two users (through the service) | ratio |")
print("|---|---|---|---|")
print(f"| ib_write_bw -s 1M, MB/s | {med(bs):.0f} | {med(bu):.0f} | {ratio(bu, bs):.2f}x |")
print(f"| ib_write_lat -s 8, us | {med(ls):.2f} | {med(lu):.2f} | {ratio(lu, ls):.2f}x |")
PY
