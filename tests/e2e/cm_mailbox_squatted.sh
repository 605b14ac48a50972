#!/usr/bin/env bash
# Another user cannot take the CM's mailboxes. A CM MAD that reaches a host
# is posted to the mailbox of the listener or connection it names. With
# abstract names (before), user nobody could bind a listener's mailbox name
# first: the REQs for that listener, private data included, went to nobody
# (who could answer them), and the listener failed or never heard them.
# Now, in the user's own domain, mailboxes are files in its 0700 runtime
# directory. Here nobody binds every abstract name the rping server's
# mailbox had and could have (its address, the wildcards); rping between
# two namespace hosts must then run, and nobody must receive nothing.
set -u
. "$(dirname "$0")/as_nobody.sh"
need_nobody || exit
a=sfmbA$$ b=sfmbB$$ va=sfmba$$ vb=sfmbb$$
out=$(mktemp -d)
chmod 777 "$out"
squatter= server=
cleanup() { kill $squatter $server 2>/dev/null; ip netns del "$a" 2>/dev/null; ip netns del "$b" 2>/dev/null; rm -rf "$out"; }
trap cleanup EXIT
. "$(dirname "$0")/two_hosts.sh"
make_two_hosts 10.99.0 || exit
port=7611
ip netns exec "$a" "${as_nobody[@]}" /usr/bin/python3 -c '
import select, signal, socket, sys
names = ["softverbs-uid0-gsi-tcp-%s:%s" % (addr, sys.argv[1]) for addr in ("10.99.0.1", "0.0.0.0", "*")]
socks = []
for n in names:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    s.bind("\0" + n)
    socks.append(s)
print("bound", len(socks), flush=True)
got = 0
def done(*_):
    print("received", got, flush=True); sys.exit(0)
signal.signal(signal.SIGTERM, done)
while True:
    for s in select.select(socks, [], [])[0]:
        s.recv(4096); got += 1
' $port >"$out/squatter" 2>&1 &
squatter=$!
for _ in $(seq 50); do grep -q bound "$out/squatter" && break; sleep 0.1; done
grep -q "bound 3" "$out/squatter" || { echo "nobody could not bind the names"; cat "$out/squatter"; exit 1; }
ip netns exec "$a" timeout 30 rping -s -a 10.99.0.1 -p $port -C 10 -v >"$out/server" 2>&1 &
server=$!
sleep 0.5
ip netns exec "$b" timeout 25 rping -c -a 10.99.0.1 -p $port -C 10 -v >"$out/client" 2>&1; crc=$?
wait $server; src=$?; server=
kill -TERM $squatter; wait $squatter; squatter=
got=$(sed -nE 's/^received ([0-9]+)/\1/p' "$out/squatter")
echo "rping: server exit $src, client exit $crc; nobody's mailboxes received ${got:-?} MADs"
tail -1 "$out/client"
fail=0
((src == 0 && crc == 0)) && grep -q "rdma-ping-9:" "$out/client" ||
  { echo "FAIL: rping did not run"; cat "$out/server" "$out/client"; fail=1; }
[[ $got == 0 ]] || { echo "FAIL: nobody received MADs meant for the listener"; fail=1; }
exit $fail
