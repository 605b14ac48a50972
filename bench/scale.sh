#!/usr/bin/env bash
# How softverbs scales with QPs and processes (issue 22, item 3): Debian's
# ib_write_bw with 1, 16 and 256 QPs, and 4 process pairs at once, within
# one host (shared memory) and between two network namespaces on a veth
# (RoCEv2), ROUNDS rounds, medians. Each figure: bandwidth, message rate, and
# the CPU both processes of a pair spent per GB moved (task-clock of every
# thread, network threads included, from perf stat). Prints Markdown tables.
#   bench/scale.sh [BUILD_DIR] [ROUNDS] [SECONDS]
# SCALE_CASES, an extended regex, keeps the cases whose "path|pairs|size|args"
# line it matches (e.g. SCALE_CASES='^net' for the RoCEv2 rows alone).
# Needs root (namespaces) and perf. CPU placement: none, the kernel
# schedules every process over the machine's CPUs.
set -u
build=${1:-build}
rounds=${2:-2}
secs=${3:-3}
export LD_LIBRARY_PATH=$(cd "$build/lib" && pwd)
source "$(dirname "$0")/netns_pair.sh"
netns_pair 10.95.8
tmp=$(mktemp -d)
netns_pair_at_exit="rm -rf $tmp"

# pair SERVER_NS CLIENT_NS SERVER_GID CLIENT_GID PORT TAG -- ARGS: one
# ib_write_bw pair; leaves "MB/s Mpps cpu_seconds" in $tmp/TAG.
pair() {
  local sns=$1 cns=$2 sgid=$3 cgid=$4 port=$5 tag=$6
  shift 7
  ip netns exec "$sns" perf stat -x, -e task-clock -o "$tmp/$tag.s" timeout 120 \
    ib_write_bw -p "$port" -D "$secs" "$@" -x "$sgid" >/dev/null 2>&1 &
  local server=$!
  sleep 0.5
  ip netns exec "$cns" perf stat -x, -e task-clock -o "$tmp/$tag.c" timeout 120 \
    ib_write_bw -p "$port" -D "$secs" "$@" -x "$cgid" "$ip_a" 2>/dev/null |
    awk '/^ *[0-9]+ +[0-9]+ / {print $4, $5; exit}' >"$tmp/$tag.r"
  wait $server
  local ms
  ms=$(cat "$tmp/$tag.s" "$tmp/$tag.c" | awk -F, '/task-clock/ {s += $1} END {print s}')  # msec
  echo "$(cat "$tmp/$tag.r") $(awk -v m="$ms" 'BEGIN {print m / 1000}')" >"$tmp/$tag"
}
# figure PATH PAIRS -- ARGS: PAIRS pairs at once; prints "MB/s Mpps cpu_s_per_GB" (sums over pairs)
figure() {
  local path=$1 pairs=$2 i
  shift 3
  for i in $(seq "$pairs"); do
    if [ "$path" = shm ]; then
      pair "$a" "$a" "$ga" "$ga" $((20200 + i)) "p$i" -- "$@" &
    else
      pair "$a" "$b" "$ga" "$gb" $((20200 + i)) "p$i" -- "$@" &
    fi
  done
  wait
  for i in $(seq "$pairs"); do cat "$tmp/p$i"; done |
    awk '{bw += $1; rate += $2; cpu += $3} END {
      gb = bw * '"$secs"' / 1000; printf "%.1f %.2f %.2f\n", bw, rate, (gb > 0) ? cpu / gb : 0 }'
}

cases=(
  "shm|1|64|-s 64 -q 1"
  "shm|1|64|-s 64 -q 16"
  "shm|1|64|-s 64 -q 256"
  "shm|4|64|-s 64 -q 1"
  "shm|1|65536|-s 65536 -q 1"
  "shm|1|65536|-s 65536 -q 16"
  "shm|1|65536|-s 65536 -q 256"
  "shm|4|65536|-s 65536 -q 1"
  "net|1|65536|-s 65536 -q 1"
  "net|1|65536|-s 65536 -q 16"
  "net|1|65536|-s 65536 -q 256"
  "net|4|65536|-s 65536 -q 1"
)
if [[ -n ${SCALE_CASES:-} ]]; then
  kept=()
  for c in "${cases[@]}"; do [[ $c =~ $SCALE_CASES ]] && kept+=("$c"); done
  cases=("${kept[@]}")
fi
declare -A got
for r in $(seq "$rounds"); do
  for c in "${cases[@]}"; do
    IFS='|' read -r path pairs size args <<<"$c"
    # shellcheck disable=SC2086
    v=$(figure "$path" "$pairs" -- $args)
    echo "round $r: $path, $pairs pair(s), ib_write_bw $args: $v (MB/s, M msg/s, CPU s per GB)" >&2
    got[$c]+="$v"$'\n'
  done
done
col() { printf '%s' "${got[$1]}" | awk -v i="$2" 'NF {print $i}' | median; }
echo "| path | processes | ib_write_bw | MB/s | M msg/s | CPU s per GB (both sides) |"
echo "|---|---|---|---|---|---|"
for c in "${cases[@]}"; do
  IFS='|' read -r path pairs size args <<<"$c"
  where=$([ "$path" = shm ] && echo "shared memory" || echo "RoCEv2, two namespaces")
  echo "| $where | $pairs pair(s) | \`$args\` | $(col "$c" 1) | $(col "$c" 2) | $(col "$c" 3) |"
done
