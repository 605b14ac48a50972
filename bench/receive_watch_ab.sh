#!/usr/bin/env bash
# Does an empty poll without a system call pay (issue 37, item 1)? Two
# figures, same run:
#  1. softverbs' io_uring receive watch (SOFTVERBS_IO_URING=1,
#     src/transport/receive_watch.h) against poll() per empty poll (the
#     default): ib_send_lat -s 8 between two network namespaces, t_typical,
#     and the client's CPU seconds (user+system), alternating, ROUNDS rounds;
#  2. the receive itself through io_uring (multishot recvmsg into a
#     provided-buffer ring) against poll()+recv(), in a UDP ping-pong on
#     loopback with both sides spinning (bench/micro/udp_receive_pingpong.cpp).
#   bench/receive_watch_ab.sh [BUILD_DIR] [ROUNDS]
# Needs root (namespaces).
set -u
build=${1:-build}
rounds=${2:-3}
export LD_LIBRARY_PATH=$(cd "$build/lib" && pwd)
source "$(dirname "$0")/netns_pair.sh"
netns_pair 10.95.6

send_lat() {  # IO_URING: "t_typical_us client_cpu_s"
  ip netns exec "$a" env SOFTVERBS_IO_URING=$1 timeout 60 ib_send_lat -s 8 -n 20000 -x "$ga" >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  ip netns exec "$b" env SOFTVERBS_IO_URING=$1 /usr/bin/time -f "CPU %U %S" timeout 60 \
    ib_send_lat -s 8 -n 20000 -x "$gb" "$ip_a" 2>&1 |
    awk '/^ *[0-9]+ +[0-9]+ / && !t {t = $5} /^CPU/ {c = $2 + $3} END {print t, c}'
  wait $server
}
declare -a lat0 lat1 cpu0 cpu1
for r in $(seq "$rounds"); do
  read -r l c < <(send_lat 0); lat0+=("$l"); cpu0+=("$c")
  read -r l c < <(send_lat 1); lat1+=("$l"); cpu1+=("$c")
  echo "round $r: poll() ${lat0[-1]} us ${cpu0[-1]} s; io_uring watch ${lat1[-1]} us ${cpu1[-1]} s" >&2
done
m() { printf '%s\n' "$@" | median; }
echo "| ib_send_lat -s 8, two namespaces (median of $rounds) | poll() per empty poll | io_uring watch | ratio |"
echo "|---|---|---|---|"
echo "| t_typical, us | $(m "${lat0[@]}") | $(m "${lat1[@]}") | $(awk -v x="$(m "${lat1[@]}")" -v y="$(m "${lat0[@]}")" 'BEGIN {printf "%.2f", x / y}') |"
echo "| client CPU, s (user+system) | $(m "${cpu0[@]}") | $(m "${cpu1[@]}") | |"
echo
echo "UDP ping-pong on loopback, both sides spinning (udp_receive_pingpong $rounds 20000):"
"$build/bin/udp_receive_pingpong" "$rounds" 20000
