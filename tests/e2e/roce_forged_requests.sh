#!/usr/bin/env bash
# Forged requests against a live RC connection between two namespace hosts:
# while ibv_rc_pingpong runs, the peer host sends the server's QP forged
# RDMA READs (random PSNs, half "in the past"; a RETH length of 0xffffffff,
# or a small one with a bad rkey) and UC SENDs (another transport's opcode).
# The pair must finish with every iteration, and the server must not grow
# (a repeated READ allocated its length before any check: 3.9 GB, or
# std::bad_alloc; a UC SEND reset the RC QP's expected PSN: RETRY_EXC_ERR).
#   roce_forged_requests.sh ROCE_FORGE
set -u
forge=$1
a=sfA$$ b=sfB$$ va=sfa$$ vb=sfb$$
out=$(mktemp -d)
cleanup() { kill $server $client 2>/dev/null; ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$out"; }
server= client=
trap cleanup EXIT
. "$(dirname "$0")/two_hosts.sh"
make_two_hosts 10.95.0 || exit
ga=$(gid_of "$a" ::ffff:10.95.0.1) gb=$(gid_of "$b" ::ffff:10.95.0.2)
[[ -n $ga && -n $gb ]] || { echo "no GID for the veth addresses"; exit 1; }
iters=30000
ip netns exec "$a" stdbuf -oL ibv_rc_pingpong -g "$ga" -n $iters -s 512 >"$out/server" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q "local address" "$out/server" && break; sleep 0.05; done
qpn=$(sed -nE 's/.*local address:.*QPN (0x[0-9a-f]+).*/\1/p' "$out/server" | head -1)
[ -n "$qpn" ] || { echo "no QPN from the server"; cat "$out/server"; exit 1; }
ip netns exec "$b" stdbuf -oL ibv_rc_pingpong -g "$gb" -n $iters -s 512 10.95.0.1 >"$out/client" 2>&1 &
client=$!
for _ in $(seq 200); do grep -q "remote address" "$out/server" && break; sleep 0.05; done
peak=0
sample() {
  local kb
  kb=$(awk '/VmHWM/ {print $2}' "/proc/$server/status" 2>/dev/null)
  ((${kb:-0} > peak)) && peak=${kb:-0}
}
for kind in read_huge read_badkey uc_send read_huge; do
  ip netns exec "$b" "$forge" 10.95.0.2 10.95.0.1 "$qpn" "$kind" 400 || echo "forging $kind failed"
  sample
done
while kill -0 $server 2>/dev/null; do sample; sleep 0.05; done
wait $server; src=$?
wait $client; crc=$?
server= client=
echo "--- server: exit $src, peak resident memory ${peak} kB"; tail -3 "$out/server"
echo "--- client: exit $crc"; tail -3 "$out/client"
fail=0
((src == 0 && crc == 0)) || { echo "FAIL: the connection did not survive the forged packets"; fail=1; }
grep -q "$iters iters" "$out/client" || { echo "FAIL: the client did not finish its iterations"; fail=1; }
((peak < 1048576)) || { echo "FAIL: the server grew to ${peak} kB"; fail=1; }
exit $fail
