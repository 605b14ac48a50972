#!/usr/bin/env bash
# Interop with the Linux soft-RoCE driver (rxe): softverbs on this host, rxe
# in a qemu guest (rxe_guest.sh builds and caches it), both running Debian's
# unmodified pingpong tools and rping; softverbs' side through our
# libibverbs (LD_LIBRARY_PATH), the guest's through Debian's libibverbs and
# rxe provider. One boot of the guest runs every step, one after another:
#   rxe_interop.sh STEP...     STEP: KIND:ROLE[:ARGS]
#     KIND rc|ud|rping; ROLE softverbs-server|softverbs-client; ARGS the
#     tool's (both sides), commas for spaces: rc:softverbs-client:-n,100,-c
# rc, ud: ibv_rc_pingpong / ibv_ud_pingpong -g (both must print "iters in");
# rping: rping -s/-c -a over rdma_cm, the guest's the kernel's IB CM, ours
# librdmacm's (CM MADs on QP1 both ways; both must exit 0).
# Everything runs in a network namespace created here and deleted on exit:
# a bridge br0 with 10.94.0.1/24 (softverbs' side) and the tap of the guest
# (10.94.0.2), so no packet reaches a real network. tshark (when installed)
# captures tap0, the guest's wire (br0 would show our UDP GSO sends before
# the kernel cuts them); the RoCEv2 packets are listed, checked for
# malformed ones, and each ICRC recomputed. The host and the guest keep in
# step over the guest's console: it says "LISTENING k" (its server is up)
# or "WAITING k" (its client waits for our "GO k", written to its console
# once our server is up), and "STEP k RESULT exit=N".
# Environment:
#   SOFTVERBS_RXE_ACCEL     qemu accelerator (default tcg)
#   SOFTVERBS_RXE_ARTIFACTS a directory that receives the guest's console log,
#                           our tools' output and the capture (always)
#   SOFTVERBS_LOG           passed to our side (e.g. debug)
# Exit 77 only when this machine cannot run the test at all: no network
# namespaces (not root), no qemu, no tap device, or the guest cannot be built
# here (rxe_guest.sh's 77: busybox-static or Debian's archive missing).
set -u
source "$(dirname "$0")/../common/tcp_port.sh"
(($#)) || { echo "usage: $0 KIND:ROLE[:ARGS]..."; exit 2; }
steps=("$@")
for st in "${steps[@]}"; do
  IFS=: read -r kind role _ <<<"$st"
  case $kind in rc | ud | rping) ;; *) echo "unknown kind in $st"; exit 2 ;; esac
  case $role in softverbs-server | softverbs-client) ;; *) echo "unknown role in $st"; exit 2 ;; esac
  tool=ibv_${kind}_pingpong
  [[ $kind == rping ]] && tool=rping
  done
here=$(cd "$(dirname "$0")" && pwd)
accel=${SOFTVERBS_RXE_ACCEL:-tcg}
host_ip=10.94.0.1 guest_ip=10.94.0.2
t0=$(date +%s.%N)
elapsed() { awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f s", b - a }'; }

command -v qemu-system-x86_64 >/dev/null || { echo "qemu-system-x86_64 not installed (qemu-system-x86)"; exit 77; }
command -v "$tool" >/dev/null || { echo "$tool not installed"; exit 77; }
[[ -c /dev/net/tun ]] || { echo "no /dev/net/tun"; exit 77; }
ns=svrxe$$
ip netns add "$ns" 2>/dev/null || { echo "cannot create network namespaces"; exit 77; }
work=$(mktemp -d)
keep=0
cleanup() {
  [[ -n ${cap_pid:-} ]] && kill "$cap_pid" 2>/dev/null
  [[ -n ${qemu_pid:-} ]] && kill "$qemu_pid" 2>/dev/null
  [[ -n ${host_pid:-} ]] && kill "$host_pid" 2>/dev/null
  wait 2>/dev/null
  ip netns del "$ns" 2>/dev/null
  if [[ -n ${SOFTVERBS_RXE_ARTIFACTS:-} ]]; then
    mkdir -p "$SOFTVERBS_RXE_ARTIFACTS" && cp -r "$work"/. "$SOFTVERBS_RXE_ARTIFACTS/" 2>/dev/null
  fi
  if ((keep)); then echo "logs and capture kept in $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

"$here/rxe_guest.sh" >"$work/guest.paths"
rc=$?
[[ $rc == 77 ]] && { echo "the rxe guest cannot be built here"; exit 77; }
mapfile -t guest <"$work/guest.paths"
[[ $rc == 0 && ${#guest[@]} == 2 ]] || { echo "rxe_guest.sh failed ($rc)"; exit 1; }
echo "guest: ${guest[0]} ${guest[1]} (ready after $(elapsed))"

ip -n "$ns" link set lo up &&
  ip -n "$ns" link add br0 type bridge &&
  ip -n "$ns" tuntap add dev tap0 mode tap || { echo "cannot create a bridge and a tap device"; exit 77; }
ip -n "$ns" link set tap0 master br0 &&
  ip -n "$ns" link set tap0 up && ip -n "$ns" link set br0 up &&
  ip -n "$ns" addr add "$host_ip/24" dev br0 || { echo "cannot set up br0"; exit 1; }

# Our side: softverbs' libibverbs (LD_LIBRARY_PATH), its GID for 10.94.0.1.
ip netns exec "$ns" ibv_devinfo -v >"$work/devinfo" 2>&1
grep -q softverbs "$work/devinfo" || {
  echo "ibv_devinfo does not show softverbs (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} must hold our libibverbs)"
  cat "$work/devinfo"; exit 1
}
gid=$(sed -nE "s/^[[:space:]]*GID\[ *([0-9]+)\]:[[:space:]]+::ffff:${host_ip//./\\.},.*/\1/p" "$work/devinfo" | head -1)
[[ -n $gid ]] || { echo "no GID for ::ffff:$host_ip"; cat "$work/devinfo"; exit 1; }
echo "softverbs: GID index $gid for ::ffff:$host_ip; $(grep -m1 -E 'active_mtu' "$work/devinfo" | xargs)"

if command -v tshark >/dev/null; then
  ip netns exec "$ns" env -u LD_PRELOAD -u LD_LIBRARY_PATH tshark -i tap0 -w "$work/br0.pcap" 2>"$work/tshark.err" &
  cap_pid=$!
  for _ in $(seq 100); do grep -q "Capturing on" "$work/tshark.err" && break; sleep 0.1; done
fi

# The guest's plan: its side of each step.
plan=""
for st in "${steps[@]}"; do
  IFS=: read -r kind role args <<<"$st"
  tool=ibv_${kind}_pingpong
  [[ $kind == rping ]] && tool=rping
  guest_role=client
  [[ $role == softverbs-client ]] && guest_role=server
  plan+="${plan:++}$guest_role/$tool/$args"
done
append="console=ttyS0 quiet panic=-1 sv_ip=$guest_ip sv_peer=$host_ip sv_gid=auto sv_timeout=60 sv_plan=$plan"

mkfifo "$work/console"
exec 8<>"$work/console"  # the guest's console input: "GO k"
# (qemu links libibverbs and librdmacm: Debian's, not ours, and no sanitizer runtime.)
ip netns exec "$ns" env -u LD_LIBRARY_PATH -u LD_PRELOAD timeout 600 qemu-system-x86_64 -accel "$accel" -m 512 -smp 1 \
  -nographic -no-reboot -kernel "${guest[0]}" -initrd "${guest[1]}" -append "$append" \
  -netdev tap,id=n0,ifname=tap0,script=no,downscript=no -device e1000,netdev=n0,mac=52:54:00:94:00:02 \
  <"$work/console" >"$work/guest.log" 2>&1 &
qemu_pid=$!

guest_says() {  # WORDS [SECONDS]: waits until the guest's console shows "SV-RXE: WORDS"; false if it never does
  local i
  for ((i = 0; i < ${2:-120} * 5; ++i)); do
    tr -d '\r' <"$work/guest.log" | grep -q "^SV-RXE: $1" && return 0
    kill -0 "$qemu_pid" 2>/dev/null || { tr -d '\r' <"$work/guest.log" | grep -q "^SV-RXE: $1"; return; }
    sleep 0.2
  done
  return 1
}
run_host() {  # K KIND ARGS [PEER]: our side of step K, in the namespace; its output in $work/softverbs.K.log
  local k=$1 kind=$2 port=$((18515 + $1)) side
  local -a args
  read -ra args <<<"${3//,/ }"
  if [[ $kind == rping ]]; then
    side=(-s -a "$host_ip")
    [[ -n ${4:-} ]] && side=(-c -a "$4")
    ip netns exec "$ns" timeout 60 rping "${side[@]}" -p "$port" "${args[@]}" >"$work/softverbs.$k.log" 2>&1 &
  else
    ip netns exec "$ns" timeout 60 "ibv_${kind}_pingpong" -g "$gid" -p "$port" "${args[@]}" ${4:+"$4"} \
      >"$work/softverbs.$k.log" 2>&1 &
  fi
  host_pid=$!
}

failed=()
k=0
for st in "${steps[@]}"; do
  k=$((k + 1))
  IFS=: read -r kind role args <<<"$st"
  port=$((18515 + k))
  if [[ $role == softverbs-server ]]; then
    guest_says "WAITING $k" || { echo "step $k ($st): the guest never got to it"; failed+=("$st"); break; }
    run_host $k "$kind" "$args"
    # Our server listens (ibv_*_pingpong: its TCP port; rping: at once).
    for _ in $(seq 100); do
      [[ $kind == rping ]] && { sleep 0.5; break; }
      tcp_listens -n "$ns" "$port" && break
      sleep 0.1
    done
    echo "GO $k" >&8
  else
    guest_says "LISTENING $k" || { echo "step $k ($st): the guest's server never listened"; failed+=("$st"); break; }
    run_host $k "$kind" "$args" "$guest_ip"
  fi
  # A guest whose side ends first leaves our server waiting: it has the
  # tool's 60 s, then is stopped.
  guest_says "STEP $k RESULT" 90
  for _ in $(seq 75); do kill -0 "$host_pid" 2>/dev/null || break; sleep 0.2; done
  kill -0 "$host_pid" 2>/dev/null && { echo "step $k: the guest's side is done; stopping ours"; kill "$host_pid"; }
  wait "$host_pid"; host_rc=$?
  host_pid=""
  guest_rc=$(tr -d '\r' <"$work/guest.log" | sed -nE "s/^SV-RXE: STEP $k RESULT exit=([0-9]+).*/\1/p" | tail -1)
  # The guest tool's own output: between the step's BEGIN and RESULT lines.
  tr -d '\r' <"$work/guest.log" | sed -n "/^SV-RXE: STEP $k BEGIN/,/^SV-RXE: STEP $k RESULT/p" >"$work/guest.$k.log"
  done_word="iters in"
  [[ $kind == rping ]] && done_word="STEP $k RESULT exit=0"  # rping prints nothing on success without -v
  ok=1
  [[ $host_rc == 0 ]] && { [[ $kind == rping ]] || grep -q "$done_word" "$work/softverbs.$k.log"; } || ok=0
  [[ $guest_rc == 0 ]] && grep -q "$done_word" "$work/guest.$k.log" || ok=0
  echo "=== step $k, $st: softverbs exit $host_rc, rxe exit ${guest_rc:-none}: $( ((ok)) && echo ok || echo FAILED) ($(elapsed))"
  grep -E "iters in|bytes in|local address|remote address|Failed|failed|error|Couldn't" "$work/guest.$k.log" | sed 's/^/  rxe: /' | head -12
  sed 's/^/  softverbs: /' "$work/softverbs.$k.log" | head -20
  ((ok)) || failed+=("$st")
done
exec 8>&-
for _ in $(seq 150); do kill -0 "$qemu_pid" 2>/dev/null || break; sleep 0.2; done
kill "$qemu_pid" 2>/dev/null
wait "$qemu_pid"; qemu_rc=$?
qemu_pid=""
echo "guest finished (qemu $qemu_rc) after $(elapsed)"
tr -d '\r' <"$work/guest.log" | sed -E 's/\x1b(\[[0-9;?]*[A-Za-z]|c)//g' >"$work/guest.txt"
guest_rc=$(sed -nE 's/^SV-RXE: RESULT exit=([0-9]+).*/\1/p' "$work/guest.txt" | tail -1)

if [[ -n ${cap_pid:-} ]]; then
  sleep 0.3
  kill -INT "$cap_pid"
  for _ in $(seq 100); do kill -0 "$cap_pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$cap_pid" 2>/dev/null
  wait "$cap_pid" 2>/dev/null
  cap_pid=""
fi

echo "--- guest (rxe)"
grep -E "^SV-RXE" "$work/guest.txt" | grep -v "^SV-RXE: devinfo" | head -60

ok=1
((${#failed[@]} == 0)) || ok=0
[[ ${guest_rc:-} == 0 ]] || ok=0

if [[ -s $work/br0.pcap ]]; then
  ts() { env -u LD_PRELOAD -u LD_LIBRARY_PATH tshark -r "$work/br0.pcap" --disable-heuristic rpcrdma_infiniband "$@" 2>/dev/null; }
  total=$(ts -Y 'udp.port == 4791' | wc -l)
  roce=$(ts -Y infiniband | wc -l)
  bad=$(ts -Y 'udp.port == 4791 && (_ws.malformed || _ws.expert.severity >= "Warning")' | wc -l)
  from_host=$(ts -Y "infiniband && ip.src == $host_ip" | wc -l)
  from_guest=$(ts -Y "infiniband && ip.src == $guest_ip" | wc -l)
  echo "--- capture of br0: $total UDP 4791 packets, $roce decoded as RoCE ($from_host from softverbs, $from_guest from rxe), $bad malformed or flagged"
  echo "opcodes (src opcode count):"
  ts -Y infiniband -T fields -e ip.src -e infiniband.bth.opcode | sort | uniq -c | sed 's/^/  /'
  fields=(-e frame.number -e ip.src -e udp.srcport -e ip.id -e ip.flags.df -e ip.ttl -e udp.checksum
          -e infiniband.bth.opcode -e infiniband.bth.destqp -e infiniband.bth.psn -e infiniband.bth.a
          -e infiniband.bth.padcnt -e infiniband.aeth.syndrome -e infiniband.aeth.msn
          -e infiniband.deth.q_key -e infiniband.deth.srcqp -e infiniband.invariant.crc)
  # (softverbs' UDP checksums show as the pseudo-header partial sum: br0 sees
  # them before the kernel completes them for the tap. rxe sends 0.)
  rows=12
  ((ok)) || rows=300   # a failure shows the whole exchange
  echo "packets (frame src sport ip.id df ttl udp.csum opcode destqp psn ackreq pad aeth msn qkey srcqp icrc):"
  ts -Y infiniband -T fields -E occurrence=f "${fields[@]}" | head -$rows | sed 's/^/  /'
  [[ $total -gt 0 && $roce == "$total" && $bad == 0 ]] || ok=0
  env -u LD_PRELOAD -u LD_LIBRARY_PATH python3 - "$work/br0.pcap" <<'PY' || ok=0
import struct, sys, zlib
data = open(sys.argv[1], 'rb').read()
frames, off = [], 24
if struct.unpack_from('<I', data, 0)[0] in (0xa1b2c3d4, 0xa1b23c4d):
    while off < len(data):
        _, _, incl, _ = struct.unpack_from('<IIII', data, off)
        frames.append(data[off + 16: off + 16 + incl]); off += 16 + incl
else:  # pcapng: enhanced packet blocks
    off = 0
    while off < len(data):
        btype, blen = struct.unpack_from('<II', data, off)
        if btype == 6:
            cap = struct.unpack_from('<I', data, off + 20)[0]
            frames.append(data[off + 28: off + 28 + cap])
        off += blen
def roce(frame):  # IPv4 UDP to 4791 only
    return (len(frame) > 42 and frame[12:14] == b'\x08\x00' and frame[23] == 17
            and int.from_bytes(frame[14 + 4 * (frame[14] & 15) + 2:][:2], 'big') == 4791)
checked = bad = 0
for i, f in enumerate(frames):
    if not roce(f):
        continue
    ip = bytearray(f[14:34]); ip[1] = 0xff; ip[8] = 0xff; ip[10:12] = b'\xff\xff'
    end = 14 + int.from_bytes(f[16:18], 'big')
    udp = bytearray(f[34:42]); udp[6:8] = b'\xff\xff'
    bth = bytearray(f[42:54]); bth[4] = 0xff
    crc = zlib.crc32(b'\xff' * 8 + ip + udp + bth + f[54:end - 4]) & 0xffffffff
    checked += 1
    if struct.pack('<I', crc) != f[end - 4:end]:
        bad += 1
        print('  frame %d from %s: ICRC should be %s, wire %s' % (i + 1, '.'.join(map(str, f[26:30])),
              struct.pack('<I', crc).hex(), f[end - 4:end].hex()))
print('ICRC recomputed on %d RoCEv2 frames, %d wrong' % (checked, bad))
sys.exit(1 if bad or not checked else 0)
PY
fi

echo "total $(elapsed)"
if ((!ok)); then
  echo "FAILED: ${failed[*]:-the capture or the guest} (rxe guest exit ${guest_rc:-none}, qemu $qemu_rc)"
  echo "--- guest console (whole)"
  cat "$work/guest.txt"
  keep=1
  exit 1
fi
exit 0
