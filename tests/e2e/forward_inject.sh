#!/usr/bin/env bash
# Another local user cannot inject packets through a process's forwarding
# socket (its abstract name is in /proc/net/unix for all to see). While
# ibv_rc_pingpong runs between two namespace hosts, user "nobody" on the
# client's host hands the client's process forged NAKs (remote access
# error) for the PSNs it sends. They must be dropped (counter
# foreign_senders) and the pair must finish: before, one such datagram of
# 72 bytes ended the connection with REM_ACCESS_ERR. The same injection
# by the client's own user still reaches it (the check is by user, and the
# tool does reach the socket).
#   forward_inject.sh FORWARD_INJECT SOFTVERBS_STAT
set -u
inject=$1 stat=$2
((EUID == 0)) || { echo "needs root (namespaces, another uid)"; exit 77; }
id nobody >/dev/null 2>&1 || { echo "no user nobody"; exit 77; }
a=sfiA$$ b=sfiB$$ va=sfia$$ vb=sfib$$
out=$(mktemp -d)
chmod 755 "$out"
server= client=
cleanup() { kill $server $client 2>/dev/null; ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT
. "$(dirname "$0")/two_hosts.sh"
make_two_hosts 10.97.0 || exit
ga=$(gid_of "$a" ::ffff:10.97.0.1) gb=$(gid_of "$b" ::ffff:10.97.0.2)
[[ -n $ga && -n $gb ]] || { echo "no GID for the veth addresses"; exit 1; }
# The tool as nobody: a copy anyone may run, with the libraries it needs.
cp "$inject" "$out/inject" && chmod 755 "$out/inject"
run_pair() {  # run_pair ITERS: starts server and client; sets qpn, psn, slot of the client
  : >"$out/server"; : >"$out/client"
  ip netns exec "$a" stdbuf -oL ibv_rc_pingpong -g "$ga" -n "$1" -s 512 >"$out/server" 2>&1 &
  server=$!
  for _ in $(seq 100); do grep -q "local address" "$out/server" && break; sleep 0.05; done
  ip netns exec "$b" stdbuf -oL ibv_rc_pingpong -g "$gb" -n "$1" -s 512 10.97.0.1 >"$out/client" 2>&1 &
  client=$!
  for _ in $(seq 200); do grep -q "remote address" "$out/client" && break; sleep 0.05; done
  qpn=$(sed -nE 's/.*local address:.*QPN (0x[0-9a-f]+).*/\1/p' "$out/client" | head -1)
  psn=$(sed -nE 's/.*local address:.*PSN (0x[0-9a-f]+).*/\1/p' "$out/client" | head -1)
  [[ -n $qpn && -n $psn ]] || { echo "no QPN/PSN from the client"; cat "$out/client"; exit 1; }
  slot=$((qpn >> 16))
}
finish() {  # finish: waits for the pair; sets src crc
  wait $server; src=$?
  wait $client; crc=$?
  server= client=
}
fail=0
# 1. As nobody: dropped, the pair finishes.
iters=20000
run_pair $iters
ip netns exec "$b" setpriv --reuid=nobody --regid=nogroup --clear-groups env SOFTVERBS_DOMAIN=uid0 \
  "$out/inject" $slot 10.97.0.1 10.97.0.2 "$qpn" "$psn" $iters || echo "(the injection reported a failure)"
foreign=$(ip netns exec "$b" "$stat" 2>/dev/null | awk '/foreign_senders/ {s += $NF} END {print s + 0}')
finish
echo "--- as nobody: server exit $src, client exit $crc, foreign_senders $foreign"; tail -2 "$out/client"
((src == 0 && crc == 0)) || { echo "FAIL: another user's forged NAKs broke the connection"; fail=1; }
grep -q "$iters iters" "$out/client" || { echo "FAIL: the client did not finish"; fail=1; }
((foreign > 0)) || { echo "FAIL: no foreign_senders counted"; fail=1; }
# 2. As the same user: they arrive (the test reaches the socket at all).
# A NAK counts only when its PSN is in flight as it arrives: sweep the PSNs
# again and again until one does.
run_pair 200000
while kill -0 $client 2>/dev/null; do
  ip netns exec "$b" env SOFTVERBS_DOMAIN=uid0 "$inject" $slot 10.97.0.1 10.97.0.2 "$qpn" "$psn" 200000 >/dev/null 2>&1
done
finish
echo "--- as the client's own user: client exit $crc"; tail -2 "$out/client"
((crc != 0)) || { echo "FAIL: the same injection by the same user had no effect: the test proves nothing"; fail=1; }
exit $fail
