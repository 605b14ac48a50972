#!/usr/bin/env bash
# What sending and receiving RoCEv2 cost softverbs per KiB, in
# instructions, which repeat from run to run where time on these shared
# machines does not (a 10% change in one thread hides in ib_write_bw's
# +-15%). ib_write_bw -s 64K between two network namespaces, one side under
# callgrind:
#   received: the server (the WRITEs' target); the sender is held to
#             8 MiB/s so that the slowed receiver loses nothing (a
#             retransmission would count);
#   sent:     the client, against a server at full speed.
# Two runs each, 100 and 400 messages: the difference per KiB is the path's
# own cost (user space only: the kernel's send, receive and copies are not
# in it), start-up and teardown cancelled out. BASELINE_LIB=<other
# build>/lib adds another build's figures, same run.
#   bench/roce_instructions.sh [BUILD_DIR]
# Needs root (namespaces) and valgrind.
set -u
build=${1:-build}
source "$(dirname "$0")/netns_pair.sh"

instructions() {  # LIB SIDE MESSAGES: the instruction count of that side's process
  local lib=$1 side=$2 n=$3 out server_cg=() client_cg=() limit=()
  out=$(mktemp)
  local cg=(valgrind --tool=callgrind --callgrind-out-file="$out")
  if [ "$side" = received ]; then
    server_cg=("${cg[@]}") limit=(--rate_limit=8 --rate_units=M --rate_limit_type=SW)
  else
    client_cg=("${cg[@]}")
  fi
  ip netns exec "$a" env LD_LIBRARY_PATH="$lib" SOFTVERBS_ARENA_GB=1 timeout 300 \
    "${server_cg[@]}" ib_write_bw -s 65536 -n "$n" -x "$ga" >/dev/null 2>&1 &
  local server=$!
  sleep $([ "$side" = received ] && echo 8 || echo 1)  # (valgrind's start)
  ip netns exec "$b" env LD_LIBRARY_PATH="$lib" SOFTVERBS_ARENA_GB=1 timeout 300 \
    "${client_cg[@]}" ib_write_bw -s 65536 -n "$n" "${limit[@]}" -x "$gb" "$ip_a" >/dev/null 2>&1
  wait $server
  sed -n 's/^summary: //p' "$out"
  rm -f "$out"
}

per_kib() {  # LIB SIDE: instructions per KiB
  local short long
  short=$(instructions "$1" "$2" 100) long=$(instructions "$1" "$2" 400)
  [ -n "$short" ] && [ -n "$long" ] || { echo "no figure (did valgrind run?)"; return; }
  echo $(((long - short) / (300 * 64)))
}

export LD_LIBRARY_PATH=$(cd "$build/lib" && pwd)
netns_pair 10.95.13
libs=("$LD_LIBRARY_PATH")
[ -n "${BASELINE_LIB:-}" ] && libs+=("$(cd "$BASELINE_LIB" && pwd)")
echo "instructions per KiB, ib_write_bw -s 64K (the side's process, user space):"
for side in received sent; do
  for lib in "${libs[@]}"; do echo "  $side, $lib: $(per_kib "$lib" "$side")"; done
done
exit 0
