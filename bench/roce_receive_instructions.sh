#!/usr/bin/env bash
# What receiving costs softverbs per KiB, in instructions, which repeat
# from run to run where time on these shared machines does not (a 10%
# change in the receiving network thread hides in ib_write_bw's +-15%).
# ib_write_bw -s 64K between two network namespaces, the receiving side
# under callgrind, the sender held to 8 MiB/s so that the slowed receiver
# loses nothing (a retransmission would count). Two runs, 100 and 400
# messages: the difference per KiB is the receive path's own cost
# (user space only: the kernel's receive and copy are not in it), start-up
# and teardown cancelled out. BASELINE_LIB=<other build>/lib adds another
# build's figure, same run.
#   bench/roce_receive_instructions.sh [BUILD_DIR]
# Needs root (namespaces) and valgrind.
set -u
build=${1:-build}
source "$(dirname "$0")/netns_pair.sh"

instructions() {  # LIB MESSAGES: the receiving process's instruction count
  local lib=$1 n=$2 out
  out=$(mktemp)
  LD_LIBRARY_PATH=$lib ip netns exec "$a" env LD_LIBRARY_PATH="$lib" SOFTVERBS_ARENA_GB=1 timeout 300 \
    valgrind --tool=callgrind --callgrind-out-file="$out" ib_write_bw -s 65536 -n "$n" -x "$ga" >/dev/null 2>&1 &
  local server=$!
  sleep 8  # (valgrind's start)
  ip netns exec "$b" env LD_LIBRARY_PATH="$lib" SOFTVERBS_ARENA_GB=1 timeout 300 ib_write_bw -s 65536 -n "$n" \
    --rate_limit=8 --rate_units=M --rate_limit_type=SW -x "$gb" "$ip_a" >/dev/null 2>&1
  wait $server
  sed -n 's/^summary: //p' "$out"
  rm -f "$out"
}

per_kib() {  # LIB: instructions per KiB received
  local short long
  short=$(instructions "$1" 100) long=$(instructions "$1" 400)
  [ -n "$short" ] && [ -n "$long" ] || { echo "no figure (did valgrind run?)"; return; }
  echo $(((long - short) / (300 * 64)))
}

export LD_LIBRARY_PATH=$(cd "$build/lib" && pwd)
netns_pair 10.95.13
echo "instructions per KiB received, ib_write_bw -s 64K (receiving process, user space):"
echo "  $build: $(per_kib "$LD_LIBRARY_PATH")"
[ -n "${BASELINE_LIB:-}" ] && echo "  ${BASELINE_LIB}: $(per_kib "$(cd "$BASELINE_LIB" && pwd)")"
exit 0
