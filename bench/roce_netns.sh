#!/usr/bin/env bash
# RoCEv2 through softverbs between two network namespaces joined by a veth
# pair, against the kernel's own transports on the same link, in one run,
# alternating, ROUNDS rounds (issue 22's targets):
#   ib_write_bw -s 1048576            vs  iperf3 (TCP) throughput            >= 1.0
#   ib_write_lat -s 8, t_typical      vs  sockperf ping-pong, both sides spinning, as perftest's do   <= 1.5
#   ib_send_lat -s 8, t_typical       vs  the same sockperf ping-pong        <= 1.5
#   ib_write_bw -s 1048576, 3% loss   vs  the same without loss              >= 0.7
#   ib_write_lat -s 8, t_typical      vs  qperf udp_lat (sides that sleep in recv; no target)
#   ib_read_bw -s 65536               vs  iperf3 (TCP) throughput            (issue 37; no target)
#   ib_write_bw -s 8 message rate     vs  iperf3 UDP, 16-byte datagrams, as fast as it sends:
#                                         the datagrams received a second (no target)
# Loss: an nftables rule drops 3% of each host's UDP 4791 packets at random.
# Prints a Markdown table (medians of the per-round ratios) to stdout.
#   bench/roce_netns.sh [BUILD_DIR] [ROUNDS] [LINK_MTU]
# LINK_MTU (default 1500) is the veth's MTU for both sides (9000: jumbo
# frames, RoCE path MTU 4096 as RoCE networks are usually run).
set -u
build=${1:-build}
rounds=${2:-3}
mtu=${3:-1500}
export LD_LIBRARY_PATH=$(cd "$build/lib" && pwd)
source "$(dirname "$0")/netns_pair.sh"
netns_pair 10.95.0 "$mtu"

perftest() {  # prints the client's result line
  ip netns exec "$a" timeout 120 "$@" -x "$ga" >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  ip netns exec "$b" timeout 120 "$@" -x "$gb" 10.95.0.1 2>/dev/null | awk '/^ *[0-9]+ +[0-9]+ / {print; exit}'
  wait $server
}
write_bw() { perftest ib_write_bw -s 1048576 -D 5 | awk '{print $4}'; }            # BW average, MB/s
write_lat() { perftest ib_write_lat -s 8 -n 20000 | awk '{print $5}'; }            # t_typical, us
send_lat() { perftest ib_send_lat -s 8 -n 20000 | awk '{print $5}'; }              # t_typical, us
read_bw() { perftest ib_read_bw -s 65536 -D 5 | awk '{print $4}'; }               # BW average, MB/s
msg_rate() { perftest ib_write_bw -s 8 -D 5 | awk '{print $5}'; }                  # MsgRate, Mpps
udp_rate() {  # iperf3's UDP datagrams received a second, in millions (16 bytes: its header's least)
  ip netns exec "$a" iperf3 -s -1 >/dev/null 2>&1 &
  sleep 0.5
  ip netns exec "$b" iperf3 -c 10.95.0.1 -u -b 0 -l 16 -t 5 -J | python3 -c '
import json, sys
s = json.load(sys.stdin)["end"]["sum"]
print(round((s["packets"] - s["lost_packets"]) / s["seconds"] / 1e6, 3))'
  wait
}
iperf() {
  ip netns exec "$a" iperf3 -s -1 >/dev/null 2>&1 &
  sleep 0.5
  ip netns exec "$b" iperf3 -c 10.95.0.1 -t 5 -J | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"] / 8e6, 2))'
  wait
}
udp_lat() {
  ip netns exec "$a" qperf >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  ip netns exec "$b" qperf -t 5 10.95.0.1 udp_lat | awk '/latency/ {v=$3; if ($4 == "ms") v *= 1000; if ($4 == "ns") v /= 1000; print v}'
  kill $server; wait $server 2>/dev/null
}
spin_lat() {  # a UDP ping-pong whose two sides spin (non-blocking), as perftest's do: median one-way us
  command -v sockperf >/dev/null || { echo nan; return; }
  ip netns exec "$a" sockperf sr -i 10.95.0.1 -p 11111 --nonblocked >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  ip netns exec "$b" sockperf pp -i 10.95.0.1 -p 11111 -t 5 -m 16 --nonblocked 2>&1 |
    awk '/percentile 50.000/ {print $NF; exit}'
  kill $server; wait $server 2>/dev/null
}
loss() { netns_loss "$1" 3; }

ratio() { awk -v x="$1" -v y="$2" 'BEGIN {if (y > 0) printf "%.2f", x / y; else print "nan"}'; }
declare -a r_bw r_lat r_loss r_spin r_send r_read r_rate
for r in $(seq "$rounds"); do
  bw=$(write_bw); tcp=$(iperf)
  lat=$(write_lat); slat=$(send_lat); udp=$(udp_lat); spin=$(spin_lat)
  loss on; lossy=$(write_bw); loss off
  rbw=$(read_bw); rate=$(msg_rate); urate=$(udp_rate)
  r_bw+=("$(ratio "$bw" "$tcp")"); r_lat+=("$(ratio "$lat" "$udp")"); r_loss+=("$(ratio "$lossy" "$bw")")
  r_spin+=("$(ratio "$lat" "$spin")"); r_send+=("$(ratio "$slat" "$spin")")
  r_read+=("$(ratio "$rbw" "$tcp")"); r_rate+=("$(ratio "$rate" "$urate")")
  echo "round $r: ib_write_bw ${bw} MB/s, iperf3 ${tcp} MB/s; ib_write_lat ${lat} us, ib_send_lat ${slat} us, qperf udp_lat ${udp} us, sockperf spinning ${spin} us; with 3% loss ${lossy} MB/s; ib_read_bw 64K ${rbw} MB/s; 8 B ${rate} Mpps, UDP ${urate} Mpps" >&2
  rows+=("$bw $tcp $lat $udp $lossy $spin $slat $rbw $rate $urate")
done
col() {  # the median of column $1 of the rounds
  local i=$1 row
  for row in "${rows[@]}"; do echo "$row" | awk -v i="$i" '{print $i}'; done | median
}
med() { printf '%s\n' "$@" | median; }
met() { awk -v m="$1" -v op="$2" -v t="$3" 'BEGIN {print ((op == ">=") ? (m >= t) : (m <= t)) ? "yes" : "no"}'; }
echo "| measure | softverbs | peer | ratio (median of rounds) | per round | target | met |"
echo "|---|---|---|---|---|---|---|"
m=$(med "${r_bw[@]}"); echo "| ib_write_bw -s 1M vs iperf3 TCP (MB/s) | $(col 1) | $(col 2) | $m | ${r_bw[*]} | >= 1.0 | $(met "$m" ">=" 1.0) |"
m=$(med "${r_spin[@]}"); echo "| ib_write_lat -s 8 vs sockperf ping-pong, both sides spinning (us, one way) | $(col 3) | $(col 6) | $m | ${r_spin[*]} | <= 1.5 | $(met "$m" "<=" 1.5) |"
m=$(med "${r_send[@]}"); echo "| ib_send_lat -s 8 vs sockperf ping-pong, both sides spinning (us, one way) | $(col 7) | $(col 6) | $m | ${r_send[*]} | <= 1.5 | $(met "$m" "<=" 1.5) |"
m=$(med "${r_loss[@]}"); echo "| ib_write_bw -s 1M with 3% loss vs without (MB/s) | $(col 5) | $(col 1) | $m | ${r_loss[*]} | >= 0.7 | $(met "$m" ">=" 0.7) |"
# Not a target: qperf's sides sleep in recv() and pay a wake-up per message.
m=$(med "${r_lat[@]}"); echo "| ib_write_lat -s 8 vs qperf udp_lat, sides sleeping in recv (us, one way) | $(col 3) | $(col 4) | $m | ${r_lat[*]} | (none) | - |"
m=$(med "${r_read[@]}"); echo "| ib_read_bw -s 64K vs iperf3 TCP (MB/s) | $(col 8) | $(col 2) | $m | ${r_read[*]} | (none) | - |"
m=$(med "${r_rate[@]}"); echo "| ib_write_bw -s 8 message rate vs iperf3 UDP 16-byte datagrams received (Mpps) | $(col 9) | $(col 10) | $m | ${r_rate[*]} | (none) | - |"
