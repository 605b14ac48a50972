#!/usr/bin/env bash
# A local user poses as a remote host through the host service (issue 36).
# Hosts A and B (network namespaces on a veth), a service in each; root's
# ibv_rc_pingpong client on A talks to root's server on B. User daemon on
# A leases, from A's service, the slot number that the server's QPN carries
# (free on A: a slot number is only unique per host), then sends NAKs
# through the service with B's address as their source, to the client's
# QPN. Before: the service stamped them with that slot, the client took
# them as its peer's, and the connection died ("remote access error") on
# the first sweep at known PSNs; a blind sweep of every PSN ended it too.
# Now a local process speaks only from this host's addresses: the service
# refuses the datagrams (counted as forged), and a stamped datagram from
# another host's address would be dropped by the receiver too.
#  1. known PSNs: sweeps over the PSNs the client sends while it runs;
#  2. unknown PSN: a blind sweep of 2^18 PSNs from a random start;
# each time the pair completes, and the service counts every datagram as
# forged. $1: softverbs-hostd, $2: hostd_inject.
set -u
hostd=${1:?softverbs-hostd} inject=${2:?hostd_inject}
. "$(dirname "$0")/hostd_host.sh"
need_users || exit
make_service_hosts f 10.98.3 || exit
cp "$inject" "$out/inject" && chmod 755 "$out/inject"
mkdir -m 700 "$out/rt-a" "$out/rt-b" || exit 1
declare -A service_of
for h in "$a" "$b"; do
  n=$h start_service "$out/hostd.$h" || exit 1
  service_of[$h]=$service_pid
done
fail=0
# B's first processes hold slots 1 and 2, so that the server's QPN carries
# slot 3, free on A (where the client has slot 1).
for p in 18641 18642; do
  ip netns exec "$b" env SOFTVERBS_RUNTIME_DIR="$out/rt-b" timeout 120 ibv_rc_pingpong -g "$gb" -p $p >/dev/null 2>&1 &
  pids+=($!)
done
sleep 0.5

attack() {  # attack known|blind
  # (Iterations enough that the pair still runs when the first sweep
  # starts: at 4000 a pair that ran 0.6 s ended, under CI's load, before
  # the script had read its addresses, and nothing was swept.)
  local how=$1 iters=20000
  : >"$out/$how.server"; : >"$out/$how.client"
  ip netns exec "$b" env SOFTVERBS_RUNTIME_DIR="$out/rt-b" timeout 90 stdbuf -oL \
    ibv_rc_pingpong -g "$gb" -p 18640 -n $iters -s 512 -e >"$out/$how.server" 2>&1 &
  local server=$!
  for _ in $(seq 100); do grep -q "local address" "$out/$how.server" && break; sleep 0.05; done
  ip netns exec "$a" env SOFTVERBS_RUNTIME_DIR="$out/rt-a" timeout 90 stdbuf -oL \
    ibv_rc_pingpong -g "$ga" -p 18640 -n $iters -s 512 -e 10.98.3.2 >"$out/$how.client" 2>&1 &
  local client=$!
  for _ in $(seq 200); do grep -q "remote address" "$out/$how.client" && break; sleep 0.05; done
  local qpn psn peer
  qpn=$(sed -nE 's/.*local address:.*QPN (0x[0-9a-f]+).*/\1/p' "$out/$how.client" | head -1)
  psn=$(sed -nE 's/.*local address:.*PSN (0x[0-9a-f]+).*/\1/p' "$out/$how.client" | head -1)
  peer=$(sed -nE 's/.*remote address:.*QPN (0x[0-9a-f]+).*/\1/p' "$out/$how.client" | head -1)
  [[ -n $qpn && -n $psn && -n $peer ]] || { echo "FAIL: the pair did not start"; cat "$out/$how.client"; fail=1; return; }
  local slot=$((peer >> 16))
  echo "client QPN $qpn PSN $psn on A; its peer's QPN $peer on B (slot $slot)"
  ((slot != qpn >> 16)) || { echo "FAIL: the peer's slot is the client's own: the test proves nothing"; fail=1; }
  # (Five sweeps at known PSNs: before the fix the first one broke the
  # connection; more only burned the CPU the pair and CI's other tests
  # need, up to 100 while the pair ran.)
  local sweeps=0 max=5 count=$iters start=$psn
  if [[ $how == blind ]]; then max=1 count=262144 start=$(((RANDOM << 9 ^ RANDOM) & 0xffffff)); fi
  while kill -0 $client 2>/dev/null && ((sweeps < max)); do
    ip netns exec "$a" "${as_daemon[@]}" env HOSTD_INJECT_SLOT=$slot "$out/inject" service 10.98.3.2 10.98.3.1 \
      "$qpn" "$start" $count >>"$out/$how.inject" 2>&1
    sweeps=$((sweeps + 1))
  done
  echo "($sweeps sweeps of $count forged NAKs from B's address, through A's service, as slot $slot)"
  grep -m1 "leased slot" "$out/$how.inject" || { echo "FAIL: the attacker could not lease slot $slot"; fail=1; }
  wait $server; local src=$?
  wait $client; local crc=$?
  echo "--- $how PSN: server exit $src, client exit $crc"; tail -n 1 "$out/$how.client"
  ((src == 0 && crc == 0)) || { echo "FAIL: NAKs forged as host B broke the connection ($how PSN)"; tail -n 3 "$out/$how.server" "$out/$how.client"; fail=1; }
}
attack known
attack blind
kill -TERM "${service_of[$a]}"
wait "${service_of[$a]}"
grep stopped "$out/hostd.$a"
forged=$(sed -nE 's/.*, ([0-9]+) with a forged source.*/\1/p' "$out/hostd.$a")
((${forged:-0} >= 262144)) || { echo "FAIL: A's service did not refuse the forged datagrams (${forged:-0} counted)"; fail=1; }
exit $fail
