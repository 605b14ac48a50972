#!/usr/bin/env bash
# Two-sided small-message latency, softverbs against UCX's shared-memory
# transports, measured in the same run (rounds interleaved, medians kept):
#   ibv_rc_pingpong -s 8 -n N        (Debian's binary, through softverbs;
#                                     reports usec per round trip)
#   ucx_perftest -t tag_lat -s 8 -n N (UCX_TLS=posix,cma,self; reports the
#                                     one-way latency, half a round trip)
# Prints a Markdown table with the ratio per round trip.
#   bench/pingpong_vs_ucx.sh [ROUNDS] [ITERS]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$root/build}
rounds=${1:-5}
iters=${2:-100000}
gid=$(LD_LIBRARY_PATH=$build/lib "$root/tests/e2e/loopback_gid.sh")
port=19900

softverbs_rtt() {
  LD_LIBRARY_PATH=$build/lib ibv_rc_pingpong -p $port -g "$gid" -s 8 -n "$iters" >/dev/null 2>&1 &
  local server=$!
  sleep 0.3
  LD_LIBRARY_PATH=$build/lib ibv_rc_pingpong -p $port -g "$gid" -s 8 -n "$iters" 127.0.0.1 2>/dev/null |
    sed -nE 's/.* = ([0-9.]+) usec\/iter/\1/p'
  wait $server
}

ucx_rtt() {
  UCX_TLS=posix,cma,self ucx_perftest -p $((port + 1)) >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  # "Final:" row: iterations, 50%ile, average, overall (usec, one way).
  UCX_TLS=posix,cma,self ucx_perftest -p $((port + 1)) 127.0.0.1 -t tag_lat -s 8 -n "$iters" 2>/dev/null |
    awk '/Final:/ { printf "%.3f\n", 2 * $3 }'
  wait $server
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

sv=() uc=()
for ((i = 0; i < rounds; i++)); do
  sv+=("$(softverbs_rtt)")
  uc+=("$(ucx_rtt)")
done
sv_med=$(printf '%s\n' "${sv[@]}" | median)
uc_med=$(printf '%s\n' "${uc[@]}" | median)
ratio=$(awk -v a="$sv_med" -v b="$uc_med" 'BEGIN { printf "%.2f", a / b }')
echo "| 8-byte ping-pong, round trip (median of $rounds x $iters) | usec |"
echo "|---|---|"
echo "| softverbs: ibv_rc_pingpong -s 8 | $sv_med |"
echo "| UCX posix,cma,self: ucx_perftest -t tag_lat -s 8 (50%ile x 2) | $uc_med |"
echo "| ratio softverbs / UCX | $ratio |"
echo
echo "rounds: softverbs ${sv[*]}; ucx ${uc[*]}"
