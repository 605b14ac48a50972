#!/usr/bin/env bash
# A network namespace is a host: each has registry slots of its own, so
# namespace hosts on one machine do not share the process limit (issue 39).
# Host A's registry is filled to the README's limit (4096: the next process
# gets EAGAIN), by user nobody (tests/e2e/as_nobody.sh: the limit a user
# without privileges meets), and held full while host B, as root, opens 300
# processes of its own (more than the 255 a host had before names were
# leased in blocks): all of them open. (e2e_cm_ring_4096_processes holds
# 4096 as root.)
# usage: process_limit_netns.sh <process_limit_tool> <README.md>
set -u
tool=$1 readme=$2
. "$(dirname "$0")/as_nobody.sh"
need_nobody || exit
limit=$(grep -oE '[0-9]+ processes per domain' "$readme" | grep -oE '^[0-9]+') ||
  { echo "the README states no process limit"; exit 1; }
a=svplA$$ b=svplB$$
work=$(mktemp -d)
chmod 755 "$work"  # (nobody waits for $work/release)
export SOFTVERBS_DOMAIN=limitns$$
holder=
cleanup() { touch "$work/release"; [ -n "$holder" ] && wait $holder; ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null; rm -rf "$work" /dev/shm/softverbs-limitns$$.v*; }
trap cleanup EXIT
ip netns add $a && ip netns add $b || { echo "cannot make network namespaces"; exit 1; }
eagain=$(python3 -c 'import errno; print(errno.EAGAIN)')

HOLD_UNTIL_FILE=$work/release ip netns exec $a timeout 240 "${as_nobody[@]}" "$tool" $((limit + 1)) >"$work/a" 2>&1 &
holder=$!
for _ in $(seq 1800); do grep -q holding "$work/a" && break; kill -0 $holder 2>/dev/null || break; sleep 0.1; done
grep -q "holding: opened $limit first_error $eagain" "$work/a" ||
  { echo "FAIL: host A (user nobody) did not open $limit, the README's limit, and get EAGAIN for the next"; cat "$work/a"; exit 1; }
in_b=300
out_b=$(ip netns exec $b timeout 120 "$tool" $in_b)
echo "host A (held full): $(grep holding "$work/a")"
echo "host B meanwhile: $out_b"
touch "$work/release"; wait $holder; rc_a=$?; holder=
grep -q "opened $in_b first_error 0 " <<<"$out_b" ||
  { echo "FAIL: host B, while host A's $limit are held, should open all $in_b"; exit 1; }
((rc_a == 0)) || { echo "FAIL: host A's tool failed"; cat "$work/a"; exit 1; }
echo "PASS: $limit processes of user nobody in host A (the next gets EAGAIN) and $in_b of root in host B at once"
