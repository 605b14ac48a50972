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

n=25
# Both checks at once, each on a group of its own (mckey sleeps 3 s after
# joining, members and sender alike: one after the other they took 14 s of
# both CPUs). A member given the other group's messages would fail check 2.
# start_members GROUP EXPECTED TAG: three receivers expecting EXPECTED
# messages each ($work/TAG.1..3, pids in members_TAG).
declare -A members
start_members() {
  local group=$1 expected=$2 tag=$3 r ns addr k
  for r in "$a:10.95.0.1:1" "$a:10.95.0.1:2" "$b:10.95.0.2:3"; do
    IFS=: read -r ns addr k <<<"$r"
    ip netns exec "$ns" timeout 30 stdbuf -oL mckey -m "$group" -b "$addr" -C "$expected" >"$work/$tag.$k" 2>&1 &
    pids+=($!)
    members[$tag.$k]=$!
  done
}
start_members 239.95.0.1 $n exact
start_members 239.95.0.2 $((n + 1)) once
for _ in $(seq 300); do
  (($(cat "$work"/exact.? "$work"/once.? | grep -c "receiving data transfers") == 6)) && break
  sleep 0.05
done
# send GROUP TAG: n messages from host B
send() {
  ip netns exec "$b" timeout 30 mckey -m "$1" -b 10.95.0.2 -s -C $n >"$work/sender.$2" 2>&1 ||
    { echo "sender to $1 failed:"; cat "$work/sender.$2"; return 1; }
}
send 239.95.0.1 exact & exact_sender=$!
send 239.95.0.2 once & once_sender=$!
wait $exact_sender && wait $once_sender || exit 1

# 1. Members expecting the n messages sent all complete.
for k in 1 2 3; do
  wait "${members[exact.$k]}" || { echo "receiver $k did not get its $n messages:"; cat "$work/exact.$k"; exit 1; }
done
echo "1. each of the 3 members got $n messages (2 in host A over the link, 1 in host B)"

# 2. Members expecting n + 1 all wait on: none was given a message twice.
sleep 2
for k in 1 2 3; do
  kill -0 "${members[once.$k]}" 2>/dev/null ||
    { echo "receiver $k got $((n + 1)) messages out of $n sent: a duplicate"; cat "$work/once.$k"; exit 1; }
done
echo "2. no member got a message twice"
