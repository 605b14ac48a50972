#!/usr/bin/env bash
# What a hostile local user tried against the host service and could not do
# (issue 36's probes that held), kept holding. Hosts A and B (network
# namespaces on a veth), the service on A; user daemon is the attacker:
#  1. messages of every type to the service, truncated, oversized and of
#     unknown types, on connections of their own and on one shared: the
#     service still leases afterwards, and refuses a second lease on one
#     connection (one per process);
#  2. daemon leases every slot it can: root's next process is refused at
#     once with an error that says so, and runs again once daemon lets go;
#  3. a flood of datagrams from host B at a victim's slot (a QPN of it
#     with no QP) while the victim's pair with another user runs: the pair
#     completes;
#  4. daemon plants the directory of root's sysfs view (in a private
#     /dev/shm): root's process says so and writes its view elsewhere,
#     nothing in daemon's directory.
# $1: softverbs-hostd, $2: hostd_probe, $3: hostd_inject.
set -u
hostd=${1:?softverbs-hostd} probe=${2:?hostd_probe} inject=${3:?hostd_inject}
. "$(dirname "$0")/hostd_host.sh"
need_users || exit
make_service_hosts k 10.98.4 || exit
cp "$probe" "$out/probe" && cp "$inject" "$out/inject" && chmod 755 "$out/probe" "$out/inject"
mkdir -m 700 "$out/rt-root" "$out/rt-nobody" && chown nobody "$out/rt-nobody" || exit 1
n=$a start_service "$out/hostd" || exit 1
fail=0

# 1. Malformed messages, and a second lease on one connection.
ip netns exec "$a" "${as_daemon[@]}" timeout 60 "$out/probe" malformed >"$out/malformed" 2>&1 ||
  { echo "FAIL: the service did not hold against malformed messages"; fail=1; }
cat "$out/malformed"
kill -0 "$service_pid" || { echo "FAIL: the service died"; exit 1; }

# 2. Every slot leased by one user: the next user is told, at once.
ip netns exec "$a" "${as_daemon[@]}" "$out/probe" leases 30 >"$out/leases" 2>&1 &
holder=$!
pids+=($holder)
for _ in $(seq 100); do grep -q "^leases:" "$out/leases" && break; sleep 0.1; done
cat "$out/leases"
start=$(date +%s%N)
ip netns exec "$a" env SOFTVERBS_RUNTIME_DIR="$out/rt-root" timeout 20 ibv_rc_pingpong -g "$ga" -p 18650 \
  >"$out/noslot" 2>&1
rc=$?
ms=$((($(date +%s%N) - start) / 1000000))
grep -h "no registry slot is free on this host" "$out/noslot" ||
  { echo "FAIL: root's process was not told that daemon holds every slot"; cat "$out/noslot"; fail=1; }
((rc != 0 && rc != 124)) || { echo "FAIL: root's process did not fail at once (exit $rc after $ms ms)"; fail=1; }
kill $holder
wait $holder 2>/dev/null

# 3. A flood from host B at the server's slot, during a pair of two users.
ip netns exec "$a" env SOFTVERBS_RUNTIME_DIR="$out/rt-nobody" "${as_nobody[@]}" timeout 90 stdbuf -oL \
  ibv_rc_pingpong -g "$ga" -p 18651 -n 2000 -e >"$out/flood.server" 2>&1 &
server=$!
for _ in $(seq 100); do grep -q "local address" "$out/flood.server" && break; sleep 0.05; done
qpn=$(sed -nE 's/.*local address:.*QPN (0x[0-9a-f]+).*/\1/p' "$out/flood.server" | head -1)
ip netns exec "$a" env SOFTVERBS_RUNTIME_DIR="$out/rt-root" timeout 90 \
  ibv_rc_pingpong -g "$ga" -p 18651 -n 2000 -e 10.98.4.1 >"$out/flood.client" 2>&1 &
client=$!
sent=0
while kill -0 $client 2>/dev/null && ((sent < 40)); do
  ip netns exec "$b" "$out/inject" udp 10.98.4.2 10.98.4.1 $(((qpn >> 16) << 16 | 0xfffe)) 0 20000 send >/dev/null 2>&1
  sent=$((sent + 1))
done
wait $server; src=$?
wait $client; crc=$?
echo "--- a pair during $sent floods of 20000 datagrams from host B at the server's slot: server exit $src, client exit $crc"
grep -h iters "$out/flood.server" "$out/flood.client"
((src == 0 && crc == 0)) || { echo "FAIL: the flood broke the victim's pair"; tail -n 3 "$out/flood.server" "$out/flood.client"; fail=1; }
((sent > 0)) || { echo "FAIL: no flood was sent: the test proves nothing"; fail=1; }

# 4. A planted sysfs view directory, in a /dev/shm of this test's own.
unshare -m --propagation private bash -c '
  mount -t tmpfs tmpfs /dev/shm || exit 77
  setpriv --reuid=daemon --regid=daemon --clear-groups mkdir -m 755 /dev/shm/softverbs-uid0.sysfs || exit 1
  ibv_devices >"$1/planted" 2>&1
  ls -A /dev/shm/softverbs-uid0.sysfs >"$1/planted.contents"
' _ "$out"
rc=$?
if ((rc == 77)); then
  echo "(no private /dev/shm here: the planted directory is not tried)"
else
  grep -h "sysfs view:.*is not ours" "$out/planted" ||
    { echo "FAIL: root's process did not say its sysfs view directory was planted"; cat "$out/planted"; fail=1; }
  [[ ! -s $out/planted.contents ]] || { echo "FAIL: root wrote into daemon's directory"; cat "$out/planted.contents"; fail=1; }
fi
exit $fail
