#!/usr/bin/env bash
# One local user makes 262144 CM mailbox claims over four connections to
# the host service (issue 36). Each claim used to scan every claim of every
# connection: seconds of the service's time per round of its loop, during
# which another user's ibv_rc_pingpong pair, whose packets the service
# handed on, failed with retry exceeded. Now a claim costs the same however
# many there are (hostd/claim_table.h), and one user's claims are bounded:
#  1. daemon's claims are all answered, granted up to its user's limit
#     (131072) and the rest refused;
#  2. meanwhile an ibv_rc_pingpong pair and an rping pair between nobody and
#     root complete.
# $1: softverbs-hostd, $2: hostd_probe.
set -u
hostd=${1:?softverbs-hostd} probe=${2:?hostd_probe}
. "$(dirname "$0")/hostd_host.sh"
need_users || exit
n=svcc$$
out=$(mktemp -d)
chmod 777 "$out"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; ip netns del "$n" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT
make_host 10.98.2 || exit
cp "$probe" "$out/probe" && chmod 755 "$out/probe"
mkdir -m 700 "$out/rt-root" "$out/rt-nobody" && chown nobody "$out/rt-nobody" || exit 1
service_nofile=1024 start_service "$out/hostd" || exit 1
fail=0

# The flood first; the victims a moment later, while the service is deep
# in it (sleeping on events, so that the flood and the service have the
# cores).
ip netns exec "$n" "${as_daemon[@]}" "$out/probe" claims 262144 4 0 >"$out/flood" 2>&1 &
flood=$!
pids+=($flood)
sleep 2
ip netns exec "$n" env SOFTVERBS_RUNTIME_DIR="$out/rt-nobody" "${as_nobody[@]}" timeout 90 \
  ibv_rc_pingpong -g "$gid" -p 18630 -n 3000 -e >"$out/pp.server" 2>&1 &
pp_server=$!
sleep 0.5
ip netns exec "$n" env SOFTVERBS_RUNTIME_DIR="$out/rt-root" timeout 90 \
  ibv_rc_pingpong -g "$gid" -p 18630 -n 3000 -e 10.98.2.1 >"$out/pp.client" 2>&1 &
pp_client=$!
pids+=($pp_server $pp_client)
# The connection manager during the flood: rping between the two users.
ip netns exec "$n" env SOFTVERBS_RUNTIME_DIR="$out/rt-nobody" "${as_nobody[@]}" timeout 60 \
  rping -s -a 10.98.2.1 -p 18631 -C 50 -V >"$out/rping.server" 2>&1 &
rs=$!
sleep 0.5
ip netns exec "$n" env SOFTVERBS_RUNTIME_DIR="$out/rt-root" timeout 60 rping -c -a 10.98.2.1 -p 18631 -C 50 -V \
  >"$out/rping.client" 2>&1
rc_client=$?
wait $rs
rc_server=$?
echo "--- rping between nobody and root during the flood: server exit $rc_server, client exit $rc_client"
((rc_server == 0 && rc_client == 0)) || { echo "FAIL: rping failed during the claim flood"; tail -n 3 "$out/rping.server" "$out/rping.client"; fail=1; }
wait $flood
flood_rc=$?
cat "$out/flood"
((flood_rc == 0)) || { echo "FAIL: the service left claims unanswered"; fail=1; }
read -r granted refused < <(sed -nE 's/^claims: ([0-9]+) granted, ([0-9]+) refused.*/\1 \2/p' "$out/flood")
((${granted:-0} == 131072 && ${refused:-0} == 262144 - 131072)) ||
  { echo "FAIL: expected 131072 claims granted and the rest refused (one user's limit)"; fail=1; }
wait $pp_server
src=$?
wait $pp_client
crc=$?
echo "--- ibv_rc_pingpong -e between nobody and root during the flood: server exit $src, client exit $crc"
grep -h iters "$out/pp.server" "$out/pp.client"
((src == 0 && crc == 0)) || { echo "FAIL: a pair of other users failed during the claim flood"; tail -n 3 "$out/pp.server" "$out/pp.client"; fail=1; }
exit $fail
