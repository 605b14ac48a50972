#!/usr/bin/env bash
# RDMA READs and atomics between two hosts (network namespaces this test
# creates, joined by a veth pair; deleted at the end) with an initiator
# depth of DEPTH (read_depth_tool.c): 8 READs of 32 KiB, 8 fetch-and-adds
# and a fenced WRITE, posted as one list. From the client's own packet
# capture (SOFTVERBS_PCAP, read with tshark), in the order its packets
# left and came:
#  - depth 16: more than one READ or atomic was on the wire at once (they
#    went one at a time before: ib_read_bw ran at 1/latency);
#  - depth 2: never more than 2 (max_rd_atomic holds);
#  - both: the fenced WRITE left only after every READ and atomic before it
#    was answered (IBV_SEND_FENCE);
# and the tool checks every READ's bytes and the atomics' values.
# Skipped (77) without the right to create namespaces or without tshark.
#   roce_read_depth_netns.sh READ_DEPTH_TOOL
set -u
tool=$1
command -v tshark >/dev/null || { echo "no tshark: skipped"; exit 77; }
a=sv-rdd-a-$$ b=sv-rdd-b-$$ va=sv-rda$$ vb=sv-rdb$$
work=$(mktemp -d)
cleanup() {
  ip netns del "$a" 2>/dev/null
  ip netns del "$b" 2>/dev/null
  [[ -n ${KEEP:-} ]] || rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*"; exit 1; }
. "$(dirname "$0")/two_hosts.sh"
make_two_hosts 10.98.4 || exit
ga=$(gid_of "$a" ::ffff:10.98.4.1) gb=$(gid_of "$b" ::ffff:10.98.4.2)
[[ -n $ga && -n $gb ]] || fail "no RoCEv2 GIDs for the veth addresses"

for depth in 16 2; do
  dir=$work/$depth
  mkdir -p "$dir"
  ip netns exec "$a" timeout 60 "$tool" server "$dir" "$ga" > "$dir/server.out" 2>&1 &
  server=$!
  ip netns exec "$b" env SOFTVERBS_PCAP="$dir/cap" timeout 60 "$tool" client "$dir" "$gb" "$depth" > "$dir/client.out" 2>&1
  rc=$?
  wait "$server"
  src=$?
  echo "--- depth $depth: client (exit $rc)"; cat "$dir/client.out"
  echo "--- depth $depth: server (exit $src)"; cat "$dir/server.out"
  [[ $rc == 0 ]] || fail "depth $depth: the client failed (exit $rc)"
  [[ $src == 0 ]] || fail "depth $depth: the server did not see the fenced WRITE and the atomics (exit $src)"
  cap=$(ls "$dir"/cap.*.pcap 2>/dev/null | head -1)
  [[ -n $cap ]] || fail "depth $depth: no capture"
  # opcode, PSN and source of each packet, in the order the client sent
  # and received them.
  tshark -r "$cap" -T fields -e ip.src -e infiniband.bth.opcode -e infiniband.bth.psn -e infiniband.reth.dmalen \
    2>/dev/null > "$dir/packets"
  python3 - "$dir/packets" "$depth" 10.98.4.2 <<'PY' || fail "depth $depth: the order on the wire (above)"
import sys
path, depth, me = sys.argv[1], int(sys.argv[2]), sys.argv[3]
READ_REQ, FETCH_ADD, WRITE_ONLY = 12, 20, 10
ANSWERS = {15, 16, 18}  # READ response last / only, atomic acknowledge
MTU = 1024  # the path MTU of the veth's 1500 bytes
# A fetch is asked once; a READ asked again after a loss names a later PSN
# of its own range (its first missing response), an atomic its own PSN.
asked, answered, most, fenced_at = [], set(), 0, None
for line in open(path):
    f = line.rstrip("\n").split("\t")
    if len(f) < 3 or not f[1].strip():
        continue
    src, op, psn = f[0], int(f[1]), int(f[2])
    if src == me and op in (READ_REQ, FETCH_ADD):
        n = -(-int(f[3]) // MTU) if op == READ_REQ and len(f) > 3 and f[3].strip() else 1
        if not any(first <= psn < first + count for first, count in asked):
            asked.append((psn, max(n, 1)))
    elif src != me and op in ANSWERS:
        answered.add(psn)
    elif src == me and op == WRITE_ONLY and fenced_at is None:
        fenced_at = (len(asked), len(answered))
    most = max(most, len(asked) - len(answered))
print(f"READs and atomics asked {len(asked)}, answered {len(answered)}; at most {most} on the wire at once;"
      f" the fenced WRITE left after {fenced_at and fenced_at[1]} answers")
ok = len(asked) == 16 and len(answered) == 16 and fenced_at == (16, 16)
ok = ok and (most > 1 if depth > 2 else most <= depth)
sys.exit(0 if ok else 1)
PY
done
echo "PASS"
