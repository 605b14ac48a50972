#!/usr/bin/env bash
# Two hosts (network namespaces on a veth), each with its host service
# (softverbs-hostd), which owns UDP 4791 and has the kernel steer every
# RoCEv2 packet to the process whose QP it is for (with HOSTD_ARGS=
# --no-steering, hands each on itself): a user on one host reaches another
# user on the other (ibv_rc_pingpong, rping), and a bulk transfer
# (ib_write_bw, 1 MiB messages; GRO buffers, handed on whole without
# steering) delivers every byte. $1: the service binary.
set -u
. "$(dirname "$0")/as_nobody.sh"
need_nobody || exit
hostd=${1:?softverbs-hostd}
a=svhA$$ b=svhB$$ va=svha$$ vb=svhb$$
out=$(mktemp -d)
chmod 777 "$out"
pids=()
cleanup() { kill "${pids[@]}" 2>/dev/null; ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT
. "$(dirname "$0")/two_hosts.sh"
make_two_hosts 10.95.7 || exit
ga=$(gid_of "$a" ::ffff:10.95.7.1) gb=$(gid_of "$b" ::ffff:10.95.7.2)
[[ -n $ga && -n $gb ]] || { echo "no GID for the veth addresses"; exit 1; }
for h in "$a" "$b"; do
  ip netns exec "$h" "$hostd" ${HOSTD_ARGS:-} 2>"$out/hostd.$h" &
  pids+=($!)
done
for h in "$a" "$b"; do
  for _ in $(seq 50); do grep -q serving "$out/hostd.$h" && break; sleep 0.1; done
  grep -q serving "$out/hostd.$h" || { echo "the service did not start in $h"; cat "$out/hostd.$h"; exit 1; }
done
fail=0
run_pair() {  # NAME SERVER_CMD... -- CLIENT_CMD...
  local name=$1
  shift
  local -a server=() client=()
  while [[ $1 != -- ]]; do server+=("$1"); shift; done
  shift
  client=("$@")
  "${server[@]}" >"$out/$name.server" 2>&1 &
  local spid=$!
  sleep 0.7
  "${client[@]}" >"$out/$name.client" 2>&1
  local crc=$?
  wait $spid
  local src=$?
  echo "--- $name: server exit $src, client exit $crc"
  grep -hE "iters|^ 1048576" "$out/$name.server" "$out/$name.client"
  ((src == 0 && crc == 0)) || { echo "FAIL: $name"; tail -n 5 "$out/$name.server" "$out/$name.client"; fail=1; }
}
run_pair rc ip netns exec "$a" "${as_nobody[@]}" timeout 30 ibv_rc_pingpong -g "$ga" -n 500 -- \
  ip netns exec "$b" timeout 30 ibv_rc_pingpong -g "$gb" -n 500 10.95.7.1
run_pair rping ip netns exec "$a" "${as_nobody[@]}" timeout 30 rping -s -a 10.95.7.1 -C 20 -V -- \
  ip netns exec "$b" timeout 30 rping -c -a 10.95.7.1 -C 20 -V
run_pair bw ip netns exec "$a" "${as_nobody[@]}" timeout 60 ib_write_bw -x "$ga" -s 1048576 -n 200 -- \
  ip netns exec "$b" timeout 60 ib_write_bw -x "$gb" -s 1048576 -n 200 10.95.7.1
kill -TERM "${pids[@]}"
wait "${pids[@]}"
pids=()
for h in "$a" "$b"; do
  grep stopped "$out/hostd.$h"
  n=$(sed -nE 's/.*stopped; ([0-9]+) datagrams forwarded.*/\1/p' "$out/hostd.$h")
  ((${n:-0} > 0)) || { echo "FAIL: the service of $h forwarded nothing"; fail=1; }
done
exit $fail
