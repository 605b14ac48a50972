#!/usr/bin/env bash
# Two users of one host talk RDMA through the host service, softverbs-hostd
# (shm/host_service.h; issue 20 item 5). In a network namespace (a host,
# with 10.97.0.1 on a veth) the service runs as root:
#  1. ibv_rc_pingpong, ibv_ud_pingpong and rping between user nobody and root
#     (before the service: RETRY_EXC_ERR and a hang, REJECTED), with
#     different QPNs though each user's registry is new (alone, both would
#     be 0x010000), each process holding a lease the service granted;
#     a REQ for a port nobody listens on is still REJECTED, and a port
#     one user listens on is in use for the other (the service hands each
#     CM MAD only to the user whose CM claimed its mailbox);
#  2. two processes of one user still meet in shared memory: the service
#     forwards none of their packets;
#  3. while it runs, nobody can bind UDP 4791 or the service's socket name;
#  4. in a namespace without the service where nobody squats the socket
#     name, root's processes refuse it, say so, and work without it;
#  5. nobody cannot break root's connection to nobody's own server by
#     forging packets from the server's address (which is this host's):
#     over UDP they come from a port the service vouches for as no local
#     process's (any local user can send from a local address; our
#     processes send from ports the service holds for them), and root's
#     process drops them (its unattested counter); through the service
#     (which takes only CM MADs from processes) they are refused. Before:
#     forged NAKs ended such a connection;
#  6. bulk data between the two users (ib_write_bw, 1 MiB) goes through the
#     rings the service made between their processes (shm/peer_ring.h),
#     not the kernel's UDP: nobody's server counts ring_datagrams.
# $1: the service binary, $2: hostd_inject, $3: softverbs-stat.
set -u
. "$(dirname "$0")/as_nobody.sh"
. "$(dirname "$0")/../common/tcp_port.sh"
need_nobody || exit
hostd=${1:?softverbs-hostd} inject=${2:?hostd_inject} stat=${3:?softverbs-stat}
n=svhd$$ m=svhe$$
out=$(mktemp -d)
chmod 777 "$out"
pids=()
cleanup() {
  kill "${pids[@]}" 2>/dev/null
  ip netns del "$n" 2>/dev/null
  ip netns del "$m" 2>/dev/null
  rm -rf "$out"
}
trap cleanup EXIT
ip netns add "$n" && ip netns add "$m" || { echo "cannot create network namespaces: skipped"; exit 77; }
ip -n "$n" link set lo up && ip -n "$n" link add v0 type veth peer name v1 && ip -n "$n" addr add 10.97.0.1/24 dev v0 &&
  ip -n "$n" link set v0 up && ip -n "$n" link set v1 up && ip -n "$m" link set lo up || { echo "cannot set up links"; exit 1; }
gid=$(ip netns exec "$n" ibv_devinfo -v | sed -nE 's/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:10\.97\.0\.1,.*/\1/p' | head -1)
[[ -n $gid ]] || { echo "no GID for 10.97.0.1"; exit 1; }
export SOFTVERBS_LOG=debug
# Each user's processes keep their registry in a new runtime directory:
# alone, each registry would give its first process slot 1 (QPN 0x01xxxx).
mkdir -m 700 "$out/rt-root" "$out/rt-nobody" && chown nobody "$out/rt-nobody" || exit 1

ip netns exec "$n" "$hostd" -v ${HOSTD_ARGS:-} 2>"$out/hostd" &
hostd_pid=$!
pids+=($hostd_pid)
for _ in $(seq 50); do grep -q serving "$out/hostd" && break; sleep 0.1; done
grep -q serving "$out/hostd" || { echo "the service did not start"; cat "$out/hostd"; exit 1; }
fail=0

# pair NAME PROGRAM SERVER_USER... : a server as one user, a client as another.
pair() {
  local name=$1 prog=$2 port=$3
  shift 3
  local -a server_as=(env "SOFTVERBS_RUNTIME_DIR=$out/rt-$1") client_as=(env "SOFTVERBS_RUNTIME_DIR=$out/rt-$2")
  [[ $1 == nobody ]] && server_as+=("${as_nobody[@]}")
  [[ $2 == nobody ]] && client_as+=("${as_nobody[@]}")
  ip netns exec "$n" "${server_as[@]}" timeout 30 "$prog" -g "$gid" -p "$port" -n 200 >"$out/$name.server" 2>&1 &
  local server=$!
  wait_tcp_port -n "$n" "$port" 5 "$server"
  ip netns exec "$n" "${client_as[@]}" timeout 30 "$prog" -g "$gid" -p "$port" -n 200 10.97.0.1 >"$out/$name.client" 2>&1
  local crc=$?
  wait $server
  local src=$?
  echo "--- $name: server ($1) exit $src, client ($2) exit $crc"
  grep -hE "local address|iters" "$out/$name.server" "$out/$name.client"
  if ((src != 0 || crc != 0)); then
    echo "FAIL: $name between $1 and $2"
    tail -n 5 "$out/$name.server" "$out/$name.client"
    fail=1
    return
  fi
  local q1 q2
  q1=$(sed -nE 's/.*local address:.*QPN (0x[0-9a-f]+).*/\1/p' "$out/$name.server")
  q2=$(sed -nE 's/.*local address:.*QPN (0x[0-9a-f]+).*/\1/p' "$out/$name.client")
  [[ -n $q1 && $q1 != "$q2" ]] || { echo "FAIL: $name: the two users' QPs have one number ($q1)"; fail=1; }
}

# 1. Between users.
pair rc ibv_rc_pingpong 18600 nobody root
q_nobody=$(sed -nE 's/.*local address:.*QPN (0x[0-9a-f]+).*/\1/p' "$out/rc.server")
q_root=$(sed -nE 's/.*local address:.*QPN (0x[0-9a-f]+).*/\1/p' "$out/rc.client")
echo "fresh registries: nobody's first QP $q_nobody, root's $q_root"
[[ $q_nobody == 0x01* && $q_root != 0x01* ]] ||
  { echo "FAIL: the service did not keep root's process off the slot nobody leased"; fail=1; }
pair ud ibv_ud_pingpong 18601 root nobody
# The connection manager too: nobody's rping server, root's client (their
# REQ and REP go through QP1 and the service, as between hosts).
ip netns exec "$n" "${as_nobody[@]}" timeout 30 rping -s -a 10.97.0.1 -p 18605 -C 20 -V >"$out/rping.server" 2>&1 &
server=$!
wait_cm_port 18605 5 "$server"
ip netns exec "$n" timeout 30 rping -c -a 10.97.0.1 -p 18605 -C 20 -V >"$out/rping.client" 2>&1
crc=$?
wait $server
src=$?
echo "--- rping: server (nobody) exit $src, client (root) exit $crc"
((src == 0 && crc == 0)) || { echo "FAIL: rping between nobody and root"; tail -n 5 "$out/rping.server" "$out/rping.client"; fail=1; }
# A REQ for a port no user listens on, while both users' processes read CM
# MADs: rejected, as the kernel's CM rejects it (no CM claimed its mailbox:
# the service has one process answer for nobody).
ip netns exec "$n" "${as_nobody[@]}" timeout 30 rping -s -a 10.97.0.1 -p 18606 -C 1 >"$out/idle.server" 2>&1 &
idle=$!
pids+=($idle)
wait_cm_port 18606 5 "$idle"
ip netns exec "$n" timeout 30 rping -c -a 10.97.0.1 -p 18607 -C 1 -v >"$out/nobody.client" 2>&1
grep -q "RDMA_CM_EVENT_REJECTED" "$out/nobody.client" ||
  { echo "FAIL: a REQ for nobody's port was not rejected"; cat "$out/nobody.client"; fail=1; }
# A port one user listens on is taken for the other, as on a host's one
# port space (rdma_listen: EADDRINUSE); nobody's listener still runs.
ip netns exec "$n" timeout 10 rping -s -a 10.97.0.1 -p 18606 -C 1 >"$out/taken.server" 2>&1
grep -q "rdma_listen: Address already in use" "$out/taken.server" ||
  { echo "FAIL: root listened on the port nobody listens on"; cat "$out/taken.server"; fail=1; }
kill $idle 2>/dev/null
for u in 0 "$(id -u nobody)"; do
  grep -q "(uid $u) leased slot" "$out/hostd" || { echo "FAIL: no lease for uid $u"; fail=1; }
done
grep -q "leased from the host service" "$out/rc.server" || { echo "FAIL: nobody's process did not use the service"; fail=1; }

# 5. Forged packets from the peer's address, over UDP and through the service.
cp "$inject" "$out/inject" && chmod 755 "$out/inject"
# (-e: the pair sleeps on completion events; two spinning processes and the
# service on this machine's two cores take milliseconds a round trip.)
attack() {  # attack udp|service: a long pair, nobody's forged NAKs at the client's PSNs
  local how=$1 iters=3000
  : >"$out/atk.server"; : >"$out/atk.client"  # not the previous attack's lines
  ip netns exec "$n" env "SOFTVERBS_RUNTIME_DIR=$out/rt-nobody" "${as_nobody[@]}" timeout 60 stdbuf -oL \
    ibv_rc_pingpong -g "$gid" -p 18610 -n $iters -s 512 -e >"$out/atk.server" 2>&1 &
  local server=$!
  for _ in $(seq 100); do grep -q "local address" "$out/atk.server" && break; sleep 0.05; done
  ip netns exec "$n" env "SOFTVERBS_RUNTIME_DIR=$out/rt-root" timeout 60 stdbuf -oL \
    ibv_rc_pingpong -g "$gid" -p 18610 -n $iters -s 512 -e 10.97.0.1 >"$out/atk.client" 2>&1 &
  local client=$!
  for _ in $(seq 200); do grep -q "remote address" "$out/atk.client" && break; sleep 0.05; done
  local qpn psn
  qpn=$(sed -nE 's/.*local address:.*QPN (0x[0-9a-f]+).*/\1/p' "$out/atk.client" | head -1)
  psn=$(sed -nE 's/.*local address:.*PSN (0x[0-9a-f]+).*/\1/p' "$out/atk.client" | head -1)
  # Sweeps of NAKs over all the PSNs the client will send, again and again
  # while it runs: some reach it while that PSN is in flight.
  local sweeps=0
  while kill -0 $client 2>/dev/null && ((sweeps < 200)); do
    ip netns exec "$n" "${as_nobody[@]}" "$out/inject" "$how" 10.97.0.1 10.97.0.1 "$qpn" "$psn" $iters >/dev/null 2>&1
    sweeps=$((sweeps + 1))
  done
  echo "($sweeps sweeps of $iters forged NAKs, $how)"
  wait $server; local src=$?
  wait $client; local crc=$?
  echo "--- forged NAKs ($how): server exit $src, client exit $crc"; tail -n 1 "$out/atk.client"
  ((src == 0 && crc == 0)) || { echo "FAIL: forged NAKs ($how) broke the connection"; tail -n 3 "$out/atk.server" "$out/atk.client"; fail=1; }
}
attack udp
attack service
# The UDP path reaches the victim's process (the test proves something):
# forged SENDs to a QPN of its slot with no QP, sent by nobody from a local
# address, count in its unattested counter (not in no_qp: they are dropped
# before any QP is looked up).
ip netns exec "$n" env "SOFTVERBS_RUNTIME_DIR=$out/rt-nobody" "${as_nobody[@]}" timeout 60 \
  ibv_rc_pingpong -g "$gid" -p 18611 -n 1000000 -e >/dev/null 2>&1 &
server=$!
wait_tcp_port -n "$n" 18611 5 "$server"
# (No timeout here: its pid must be the client's, for softverbs-stat.)
ip netns exec "$n" env "SOFTVERBS_RUNTIME_DIR=$out/rt-root" stdbuf -oL \
  ibv_rc_pingpong -g "$gid" -p 18611 -n 1000000 -e 10.97.0.1 >"$out/ctl.client" 2>&1 &
client=$!
pids+=($server $client)
for _ in $(seq 200); do grep -q "remote address" "$out/ctl.client" && break; sleep 0.05; done
cslot=$(( $(sed -nE 's/.*local address:.*QPN (0x[0-9a-f]+).*/\1/p' "$out/ctl.client" | head -1) >> 16 ))
counter() { SOFTVERBS_RUNTIME_DIR=$out/rt-root "$stat" -p "$client" 2>/dev/null | awk -v c="$1" '{for (i = 1; i < NF; i++) if ($i == c) s += $(i + 1)} END {print s + 0}'; }
before=$(counter unattested)
ip netns exec "$n" "${as_nobody[@]}" "$out/inject" udp 10.97.0.1 10.97.0.1 $((cslot << 16 | 0xfffe)) 0 300 send >/dev/null
sleep 0.5
after=$(counter unattested)
kill $server $client 2>/dev/null
echo "--- forged SENDs over UDP to the client's slot: unattested $before -> $after"

# 6. Bulk data between the users, through the rings. (nobody reads its
# own counters: its runtime directory is its alone.)
cp "$stat" "$out/stat" && chmod 755 "$out/stat"
ip netns exec "$n" env "SOFTVERBS_RUNTIME_DIR=$out/rt-nobody" "${as_nobody[@]}" timeout 60 \
  ib_write_bw -x "$gid" -p 18612 -s 1048576 -D 3 >"$out/bw.server" 2>&1 &
server=$!
wait_tcp_port -n "$n" 18612 5 "$server"
ip netns exec "$n" env "SOFTVERBS_RUNTIME_DIR=$out/rt-root" timeout 60 \
  ib_write_bw -x "$gid" -p 18612 -s 1048576 -D 3 10.97.0.1 >"$out/bw.client" 2>&1 &
client=$!
rings=0
while kill -0 $client 2>/dev/null; do
  r=$("${as_nobody[@]}" env SOFTVERBS_RUNTIME_DIR="$out/rt-nobody" "$out/stat" -a 2>/dev/null |
    awk '/device/ {for (i = 1; i < NF; i++) if ($i == "ring_datagrams") print $(i + 1)}' | sort -n | tail -1)
  ((${r:-0} > rings)) && rings=$r
  sleep 0.2
done
wait $client; crc=$?
wait $server; src=$?
echo "--- ib_write_bw 1 MiB between nobody and root: server exit $src, client exit $crc, $rings datagrams through the rings"
grep -hE "^ 1048576" "$out/bw.client"
((src == 0 && crc == 0)) || { echo "FAIL: ib_write_bw between the users"; tail -n 3 "$out/bw.server" "$out/bw.client"; fail=1; }
((rings > 1000)) || { echo "FAIL: the bulk data did not go through the rings"; fail=1; }
grep -q "rings between slot" "$out/hostd" || { echo "FAIL: the service made no rings"; fail=1; }

kill -TERM $hostd_pid
wait $hostd_pid
grep "stopped" "$out/hostd"
# (Where the kernel does not steer, the service gets them, and drops them.)
dropped=$(sed -nE 's/.*, ([0-9]+) UDP from a local address dropped.*/\1/p' "$out/hostd")
if [[ ${HOSTD_ARGS:-} == *--no-steering* ]]; then
  ((${dropped:-0} >= 300)) || { echo "FAIL: the service dropped no forged UDP: the test proves nothing"; fail=1; }
else
  ((after - before >= 150)) || { echo "FAIL: nothing forged over UDP reached the process: the test proves nothing"; fail=1; }
fi
refused=$(sed -nE 's/.*, ([0-9]+) with a forged source.*/\1/p' "$out/hostd")
((${refused:-0} > 0)) || { echo "FAIL: the service refused nothing forged through it"; fail=1; }
# 2. One user: shared memory, not the service (a new service counts alone).
ip netns exec "$n" "$hostd" ${HOSTD_ARGS:-} 2>"$out/hostd2" &
hostd_pid=$!
pids+=($hostd_pid)
for _ in $(seq 50); do grep -q serving "$out/hostd2" && break; sleep 0.1; done
pair same ibv_rc_pingpong 18603 root root

# 3. Squatters, while the service runs.
ip netns exec "$n" "${as_nobody[@]}" /usr/bin/python3 - >"$out/squat" 2>&1 <<'PY'
import socket
for family, addr in ((socket.AF_INET, ("0.0.0.0", 4791)), (socket.AF_INET6, ("::", 4791))):
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        s.bind(addr); print("bound udp", family)
    except OSError as e:
        print("refused udp", e.errno)
u = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
try:
    u.bind("\0softverbs-hostd"); print("bound name")
except OSError as e:
    print("refused name", e.errno)
PY
cat "$out/squat"
grep -q "^bound" "$out/squat" && { echo "FAIL: another user took the port or the name from the service"; fail=1; }
kill -TERM $hostd_pid
wait $hostd_pid
grep "stopped" "$out/hostd2"
forwarded=$(sed -nE 's/.*stopped; ([0-9]+) datagrams forwarded.*/\1/p' "$out/hostd2")
[[ $forwarded == 0 ]] || { echo "FAIL: packets of one user's two processes went through the service ($forwarded)"; fail=1; }

# 4. Nobody squats the name where no service runs: refused, and said.
ip netns exec "$m" "${as_nobody[@]}" /usr/bin/python3 -c '
import socket, time
u = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
u.bind("\0softverbs-hostd"); u.listen(8); print("squatting", flush=True)
while True:
    c, _ = u.accept()
' >"$out/squatter" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q squatting "$out/squatter" && break; sleep 0.1; done
ip netns exec "$m" timeout 20 ibv_rc_pingpong -g 0 -p 18604 -n 50 >"$out/sq.server" 2>&1 &
server=$!
wait_tcp_port -n "$m" 18604 5 "$server"
ip netns exec "$m" timeout 20 ibv_rc_pingpong -g 0 -p 18604 -n 50 127.0.0.1 >"$out/sq.client" 2>&1
crc=$?
wait $server
src=$?
echo "--- squatted name: server exit $src, client exit $crc"
((src == 0 && crc == 0)) || { echo "FAIL: a squatted service name broke a pair"; tail -n 5 "$out/sq.server" "$out/sq.client"; fail=1; }
grep -h "host service socket" "$out/sq.server" | head -1
grep -q "held by uid $(id -u nobody)" "$out/sq.server" || { echo "FAIL: the squatter was not named"; fail=1; }
exit $fail
