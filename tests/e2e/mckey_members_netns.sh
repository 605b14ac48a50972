#!/usr/bin/env bash
# Multicast group members on two hosts (network namespaces joined by a veth,
# created here, deleted on exit): two receiver processes in host A, one in
# host B beside the sender. A's members get the sender's packets from the
# link (each process its own copy of each), B's from shared memory (the
# packet does not come back to B: multicast loopback is off on the RoCE
# sockets). Each member must get every message exactly once:
#   1. receivers expecting N messages all complete when the sender sends N;
#   2. receivers expecting N + 1 all wait on when it sends N (a member given
#      a message twice would complete).
set -u
command -v mckey >/dev/null || { echo "mckey not installed"; exit 77; }
a=mmA$$ b=mmB$$ va=mma$$ vb=mmb$$
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
  ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
. "$(dirname "$0")/two_hosts.sh"
make_two_hosts 10.95.0 || exit

group=239.95.0.1 n=25
# round EXPECTED: starts the three receivers (expecting EXPECTED messages
# each), waits until all joined, then sends n from B.
round() {
  local expected=$1
  pids=()
  for r in "$a:10.95.0.1:1" "$a:10.95.0.1:2" "$b:10.95.0.2:3"; do
    IFS=: read -r ns addr k <<<"$r"
    ip netns exec "$ns" timeout 30 stdbuf -oL mckey -m $group -b "$addr" -C "$expected" >"$work/r$k" 2>&1 &
    pids+=($!)
  done
  for _ in $(seq 200); do
    (($(cat "$work"/r? | grep -c "receiving data transfers") == 3)) && break
    sleep 0.05
  done
  ip netns exec "$b" timeout 30 mckey -m $group -b 10.95.0.2 -s -C $n >"$work/sender" 2>&1 ||
    { echo "sender failed:"; cat "$work/sender"; exit 1; }
}

round $n
for k in 1 2 3; do
  wait "${pids[k - 1]}" || { echo "receiver $k did not get its $n messages:"; cat "$work/r$k"; exit 1; }
done
echo "round 1: each of the 3 members got $n messages (2 in host A over the link, 1 in host B)"

round $((n + 1))
sleep 2
for k in 1 2 3; do
  kill -0 "${pids[k - 1]}" 2>/dev/null ||
    { echo "receiver $k got $((n + 1)) messages out of $n sent: a duplicate"; cat "$work/r$k"; exit 1; }
done
echo "round 2: no member got a message twice"
