#!/usr/bin/env bash
# Two builds of softverbs side by side (a refactor's "no change in speed"):
# perftest with build A's libraries and with build B's, alternating within
# each round, ROUNDS rounds, between two network namespaces on a veth
# (RoCEv2; also with 3% of packets lost) and within one of them (shared
# memory). Prints a Markdown table:
# each figure's median for A and B and the median of the per-round ratios
# B/A (latencies: < 1 is faster; bandwidth and message rate: > 1 is faster).
#   bench/build_ab.sh BUILD_A BUILD_B [ROUNDS]
# Needs root (namespaces).
set -u
build_a=$(cd "$1/lib" && pwd) build_b=$(cd "$2/lib" && pwd)
rounds=${3:-3}
export LD_LIBRARY_PATH=$build_b
source "$(dirname "$0")/netns_pair.sh"
netns_pair 10.95.7

# run LIBDIR SERVER_NS CLIENT_NS SERVER_GID CLIENT_GID COLUMN -- PERFTEST ARGS: one figure
run() {
  local lib=$1 sns=$2 cns=$3 sgid=$4 cgid=$5 col=$6
  shift 7
  LD_LIBRARY_PATH=$lib ip netns exec "$sns" timeout 120 "$@" -x "$sgid" >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  LD_LIBRARY_PATH=$lib ip netns exec "$cns" timeout 120 "$@" -x "$cgid" "$ip_a" 2>/dev/null |
    awk -v c="$col" '/^ *[0-9]+ +[0-9]+ / {print $c; exit}'
  wait $server
}
net() { run "$1" "$a" "$b" "$ga" "$gb" "${@:2}"; }  # between the namespaces
shm() { run "$1" "$a" "$a" "$ga" "$ga" "${@:2}"; }  # within one
# Between the namespaces with 3% of each side's UDP 4791 packets dropped at
# random (netns_pair.sh, netns_loss).
loss() { netns_loss on 3; net "$@"; netns_loss off; }
figures=(
  "net|ib_write_bw -s 1M, MB/s|4|ib_write_bw -s 1048576 -D 3"
  "loss|ib_write_bw -s 1M, 3% loss, MB/s|4|ib_write_bw -s 1048576 -D 4"
  "net|ib_write_lat -s 8, us|5|ib_write_lat -s 8 -n 20000"
  "net|ib_send_lat -s 8, us|5|ib_send_lat -s 8 -n 20000"
  "net|ib_read_lat -s 8, us|5|ib_read_lat -s 8 -n 20000"
  "net|ib_atomic_lat, us|5|ib_atomic_lat -n 20000"
  "shm|ib_write_lat -s 8, us|5|ib_write_lat -s 8 -n 100000"
  "shm|ib_send_bw -s 8, M msg/s|5|ib_send_bw -s 8 -D 3"
  "shm|ib_write_bw -s 1M, MB/s|4|ib_write_bw -s 1048576 -D 3"
)
declare -A va vb
for r in $(seq "$rounds"); do
  for i in "${!figures[@]}"; do
    IFS='|' read -r where name col args <<<"${figures[$i]}"
    # Alternate which build goes first, so neither always runs on a warmer machine.
    if (( (r + i) % 2 )); then
      x=$($where "$build_a" "$col" -- $args); y=$($where "$build_b" "$col" -- $args)
    else
      y=$($where "$build_b" "$col" -- $args); x=$($where "$build_a" "$col" -- $args)
    fi
    va[$i]+=" ${x:-nan}"; vb[$i]+=" ${y:-nan}"
    echo "round $r: $where $name: A $x, B $y" >&2
  done
done
for i in "${!figures[@]}"; do
  IFS='|' read -r where name col args <<<"${figures[$i]}"
  echo "$where|$name|${va[$i]}|${vb[$i]}"
done | python3 -c '
import statistics, sys
med = statistics.median
print("| path | figure | A | B | B/A (median of rounds) |")
print("|---|---|---|---|---|")
for line in sys.stdin:
    where, name, a, b = line.rstrip("\n").split("|")
    a = [float(x) for x in a.split()]; b = [float(x) for x in b.split()]
    r = [y / x for x, y in zip(a, b) if x == x and y == y and x > 0]
    path = {"net": "RoCEv2, two namespaces", "loss": "RoCEv2, two namespaces, 3% loss"}.get(where, "shared memory")
    print(f"| {path} | {name} | {med(a):.2f} | {med(b):.2f} | {med(r):.2f} |" if r else f"| {path} | {name} | - | - | - |")
'
