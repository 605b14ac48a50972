#!/usr/bin/env bash
# UDP 4791 held by another user: softverbs says so, clearly, and takes the
# port once it is free. In host A (a network namespace) user nobody binds
# 4791 first (as any unprivileged program may). 1: an ibv_rc_pingpong server
# in A reports who holds the port (before: an INFO line that another process
# "forwards this process's packets", untrue, and the client's RETRY_EXC_ERR
# with no word why); the client in B fails, and nobody's socket got the RoCE
# packets (what the trust model says an unprivileged port allows: see
# docs/ARCHITECTURE.md, Security). 2: the holder exits, and a server that
# started while it held the port binds it within a second or two and serves
# a client.
set -u
. "$(dirname "$0")/as_nobody.sh"
need_nobody || exit
a=sfptA$$ b=sfptB$$ va=sfpta$$ vb=sfptb$$
out=$(mktemp -d)
chmod 777 "$out"
holder= server= client=
cleanup() { kill $holder $server $client 2>/dev/null; ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT
. "$(dirname "$0")/two_hosts.sh"
make_two_hosts 10.98.0 || exit
ga=$(gid_of "$a" ::ffff:10.98.0.1) gb=$(gid_of "$b" ::ffff:10.98.0.2)
[[ -n $ga && -n $gb ]] || { echo "no GID for the veth addresses"; exit 1; }
ip netns exec "$a" "${as_nobody[@]}" /usr/bin/python3 -c '
import signal, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", 4791))
print("bound", flush=True)
n = 0
def done(*_):
    print("received", n, flush=True); sys.exit(0)
signal.signal(signal.SIGTERM, done)
while True:
    s.recv(65536); n += 1
' >"$out/holder" 2>&1 &
holder=$!
for _ in $(seq 50); do grep -q bound "$out/holder" && break; sleep 0.1; done
grep -q bound "$out/holder" || { echo "nobody could not bind 4791"; cat "$out/holder"; exit 1; }
fail=0
# 1. The port is taken.
ip netns exec "$a" timeout 20 ibv_rc_pingpong -g "$ga" -n 5 >"$out/server1" 2>&1 &
server=$!
sleep 0.5
ip netns exec "$b" timeout 20 ibv_rc_pingpong -g "$gb" -n 5 10.98.0.1 >"$out/client1" 2>&1; crc=$?
kill $server 2>/dev/null; wait $server 2>/dev/null; server=
echo "--- port taken: client exit $crc"; grep -E "held by|Failed|iters" "$out/server1" "$out/client1"
grep -q "UDP port 4791 .* is held by uid $(id -u nobody)" "$out/server1" ||
  { echo "FAIL: the server did not say who holds the port"; cat "$out/server1"; fail=1; }
((crc != 0)) || { echo "FAIL: the client finished though its packets went to another user's socket?"; fail=1; }
# 2. The holder goes; a server that started meanwhile takes the port.
ip netns exec "$a" timeout 30 ibv_rc_pingpong -g "$ga" -n 200 >"$out/server2" 2>&1 &
server=$!
sleep 0.5
kill -TERM $holder; wait $holder; holder=
got=$(sed -nE 's/^received ([0-9]+)/\1/p' "$out/holder")
echo "nobody's socket received ${got:-?} datagrams meant for softverbs"
((${got:-0} > 0)) || { echo "FAIL: the holder got nothing: the first part did not test a taken port"; fail=1; }
sleep 2
ip netns exec "$b" timeout 25 ibv_rc_pingpong -g "$gb" -n 200 10.98.0.1 >"$out/client2" 2>&1; crc=$?
wait $server; src=$?; server=
echo "--- port freed: server exit $src, client exit $crc"; grep iters "$out/client2"
((src == 0 && crc == 0)) || { echo "FAIL: the server did not take the freed port"; cat "$out/server2" "$out/client2"; fail=1; }
exit $fail
