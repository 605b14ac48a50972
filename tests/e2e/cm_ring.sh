#!/usr/bin/env bash
# A token passed around a ring of processes (issue 39, item 6), each with
# an RC QP to the next made through rdma_cm, every one sleeping on its
# completion channel (cm_ring_tool.c):
#   cm_ring.sh TOOL host N ROUNDS       N processes on this host (127.0.0.1)
#   cm_ring.sh TOOL hosts H P ROUNDS    P processes on each of H namespace
#                                       hosts on one bridge (RoCEv2 between them)
# Every process must exit 0 and process 0 must see every round come back.
set -u
tool=$1 mode=$2
shift 2
here=$(dirname "$0")
host_ns=()
out=$(mktemp -d)
# A domain of its own: the ring takes every registry slot a host has, which
# other tests running meanwhile must not take from it (nor it from them).
export SOFTVERBS_DOMAIN=ring$$
pids=()
cleanup() {
  # (kill, not pkill: procps' pkill deadlocks at start under the ASan job's
  # LD_PRELOAD, in textdomain's lock.) timeout passes the signal on.
  ((${#pids[@]})) && kill $(cat "$out"/*.pid 2>/dev/null) "${pids[@]}" 2>/dev/null
  ((${#host_ns[@]})) && delete_hosts
  rm -rf "$out" /dev/shm/softverbs-ring$$.* /dev/shm/softverbs-ring$$
}
trap cleanup EXIT
base=$((22000 + $$ % 2000 * 8))
addr=() where=()
if [[ $mode == host ]]; then
  n=$1 rounds=$2
  for i in $(seq 0 $((n - 1))); do addr[i]=127.0.0.1 where[i]=; done
  # Listening ports below the kernel's ephemeral range (32768..60999), where
  # thousands of processes' own sockets took some (4096 processes: "listen:
  # Address already in use"), and apart for the two sizes, which run at once.
  if ((n > 1000)); then base=$((20000 + $$ % 1000 * 8)); else base=$((8000 + $$ % 500 * 8)); fi
  port() { echo $((base + $1)); }
else
  hosts=$1 per=$2 rounds=$3
  n=$((hosts * per))
  source "$here/two_hosts.sh"
  hosts_tag=svrH$$- switch_ns=svrS$$
  make_hosts "$hosts" 10.97.0 || exit $?
  # Process i on host i % H: each hop crosses the bridge.
  for i in $(seq 0 $((n - 1))); do h=$((i % hosts + 1)); addr[i]=10.97.0.$h where[i]=${host_ns[h]}; done
  port() { echo $((base + $1)); }
fi
start=$(date +%s%N)
if [[ $mode == host ]]; then  # (one process forks the ring: cm_ring_tool.c says why)
  timeout 300 "$tool" --fork "$n" 127.0.0.1 "$base" "$rounds" >"$out/0" 2>&1
  rc=$?
  echo "$(cat "$out/0") ($n processes, $(( ($(date +%s%N) - start) / 1000000 )) ms)"
  ((rc == 0)) && grep -q "ring OK: $n processes, $rounds rounds" "$out/0"
  exit
fi
for i in $(seq 0 $((n - 1))); do
  next=$(((i + 1) % n))
  cmd=("$tool" "$i" "$n" "${addr[i]}" "$(port "$i")" "${addr[next]}" "$(port "$next")" "$rounds")
  if [[ -n ${where[i]} ]]; then cmd=(ip netns exec "${where[i]}" "${cmd[@]}"); fi
  # (Each one's status in a file: bash forgets the status of children
  # past its CHILD_MAX, and 'wait PID' then says "not a child".)
  { timeout 300 "${cmd[@]}" >"$out/$i" 2>&1 & echo $! >"$out/$i.pid"; wait $!; echo $? >"$out/$i.rc"; } &
  pids+=($!)
done
wait
failed=0
for i in "${!pids[@]}"; do
  [[ $(cat "$out/$i.rc" 2>/dev/null) == 0 ]] || { echo "process $i failed: $(cat "$out/$i")"; failed=$((failed + 1)); }
done
echo "$(cat "$out/0") ($n processes, $(( ($(date +%s%N) - start) / 1000000 )) ms)"
((failed == 0)) && grep -q "ring OK: $n processes, $rounds rounds" "$out/0"
