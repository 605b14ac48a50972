#!/usr/bin/env bash
# A process stopped or hung while it claims a registry slot does not keep
# the others of its namespace waiting for ever: they give up after
# SOFTVERBS_ATTACH_WAIT_S with the holder named, and once the holder is
# killed (still holding the lock: a robust mutex) the next process attaches
# at once. Before, the claim ran under the registry's flock, and every
# later process waited on it with nothing said (the last CI's TSan job hung
# so behind an ASan test's child).
#   registry_claim_stuck.sh HOLDER_TOOL
set -u
holder_tool=$1
ns=svcs$$
rt=$(mktemp -d)
export SOFTVERBS_RUNTIME_DIR=$rt
holder=
cleanup() { [[ -n $holder ]] && kill -9 $holder 2>/dev/null; wait 2>/dev/null; ip netns del $ns 2>/dev/null; rm -rf "$rt"; }
trap cleanup EXIT
ip netns add $ns && ip -n $ns link set lo up || exit 1
ip netns exec $ns "$holder_tool" >"$rt/holder.out" 2>&1 &
holder=$!
for _ in $(seq 100); do grep -q holding "$rt/holder.out" && break; sleep 0.05; done
grep -q holding "$rt/holder.out" || { echo "FAIL: the holder did not take the lock"; cat "$rt/holder.out"; exit 1; }
fail=0
start=$(date +%s%N)
SOFTVERBS_ATTACH_WAIT_S=2 ip netns exec $ns timeout 60 ibv_rc_pingpong -g 0 >"$rt/waiter.out" 2>&1
rc=$?
took=$(( ($(date +%s%N) - start) / 1000000 ))
echo "a process that attaches meanwhile: exit $rc after $took ms: $(grep -m1 'claiming a slot' "$rt/waiter.out")"
((rc != 0 && rc != 124 && took < 20000)) || { echo "FAIL: it should fail within its wait, not hang"; cat "$rt/waiter.out"; fail=1; }
grep -q "claiming a slot for 2 s" "$rt/waiter.out" || { echo "FAIL: it should say why"; cat "$rt/waiter.out"; fail=1; }
# The holder dies holding the lock: the next process takes it at once.
kill -9 $holder; wait $holder 2>/dev/null; holder=
ip netns exec $ns timeout 20 ibv_devinfo -v >/dev/null 2>&1
ip netns exec $ns timeout 20 ibv_rc_pingpong -g 0 >"$rt/server.out" 2>&1 &
server=$!
sleep 0.5
ip netns exec $ns timeout 20 ibv_rc_pingpong -g 0 127.0.0.1 >"$rt/client.out" 2>&1
rc=$?
wait $server; src=$?
echo "after the holder was killed: a pingpong pair exits $src / $rc: $(grep -m1 'bytes in' "$rt/client.out")"
((rc == 0 && src == 0)) || { echo "FAIL: the pair should attach and run"; cat "$rt/server.out" "$rt/client.out"; fail=1; }
exit $fail
