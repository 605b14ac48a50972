#!/usr/bin/env bash
# A network namespace is a host: each has registry slots of its own, so
# namespace hosts on one machine do not share the process limit (issue 39).
# Host A's registry is filled to the README's limit (4096) by user nobody
# (tests/e2e/as_nobody.sh: the limit a user without privileges meets): a
# ring of 4096 event-driven processes, each connected to the next through
# rdma_cm, passing a token around twice (cm_ring_tool.c). Held full, the
# next process of host A gets EAGAIN, while host B, as root, opens 300
# processes of its own (more than the 255 a host had before names were
# leased in blocks): all of them open. (One set of 4096 processes for both
# claims: two tests of 4096 each cost CI's README stage ~20 s more.)
# usage: process_limit_netns.sh <cm_ring_tool> <process_limit_tool> <README.md>
set -u
ring=$1 tool=$2 readme=$3
. "$(dirname "$0")/as_nobody.sh"
need_nobody || exit
limit=$(grep -oE '[0-9]+ processes per domain' "$readme" | grep -oE '^[0-9]+') ||
  { echo "the README states no process limit"; exit 1; }
a=svplA$$ b=svplB$$
work=$(mktemp -d)
chmod 755 "$work"  # (nobody's ring waits for $work/release)
export SOFTVERBS_DOMAIN=limitns$$
holder=
cleanup() { touch "$work/release"; [ -n "$holder" ] && wait $holder; ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null; rm -rf "$work" /dev/shm/softverbs-limitns$$.v*; }
trap cleanup EXIT
ip netns add $a && ip netns add $b && ip -n $a link set lo up || { echo "cannot make network namespaces"; exit 1; }
eagain=$(python3 -c 'import errno; print(errno.EAGAIN)')

# The ring listens on ports 20000..20000+limit of its own namespace's
# loopback (below the kernel's ephemeral range, where its own sockets are).
start=$(date +%s%N)
HOLD_UNTIL_FILE=$work/release ip netns exec $a timeout 280 "${as_nobody[@]}" \
  "$ring" --fork "$limit" 127.0.0.1 20000 2 >"$work/a" 2>&1 &
holder=$!
for _ in $(seq 2400); do grep -q holding "$work/a" && break; kill -0 $holder 2>/dev/null || break; sleep 0.1; done
ring_ms=$((($(date +%s%N) - start) / 1000000))
grep -q "holding: $limit members done" "$work/a" && grep -q "ring OK: $limit processes, 2 rounds" "$work/a" ||
  { echo "FAIL: host A (user nobody): a ring of $limit, the README's limit, did not go round"; cat "$work/a"; exit 1; }
next=$(ip netns exec $a timeout 60 "${as_nobody[@]}" "$tool" 1)
in_b=300
out_b=$(ip netns exec $b timeout 120 "$tool" $in_b)
echo "host A: $(grep "ring OK" "$work/a") in $ring_ms ms, held; one more process: $next"
echo "host B meanwhile: $out_b"
touch "$work/release"; wait $holder; rc_a=$?; holder=
grep -q "opened 0 first_error $eagain " <<<"$next" ||
  { echo "FAIL: host A held full ($limit), the next process should get EAGAIN"; exit 1; }
grep -q "opened $in_b first_error 0 " <<<"$out_b" ||
  { echo "FAIL: host B, while host A's $limit are held, should open all $in_b"; exit 1; }
((rc_a == 0)) || { echo "FAIL: host A's ring failed"; cat "$work/a"; exit 1; }
echo "PASS: a ring of $limit processes of user nobody in host A (the next gets EAGAIN) and $in_b of root in host B at once"
