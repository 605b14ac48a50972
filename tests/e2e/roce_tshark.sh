#!/usr/bin/env bash
# The RoCEv2 codec (src/net) against an independent decoder: roce_pcap_gen
# builds one frame per RC, UC and UD opcode and some XRC ones (IPv4 and
# IPv6, payloads of 0-9 and 300 bytes) and writes what each field holds;
# Wireshark's InfiniBand dissector must read back every field with that
# value, find no header the opcode does not carry, and find nothing
# malformed. The IPv4 header and IPv6 UDP checksums are verified by tshark.
# The ICRC of every frame is recomputed here with Python's zlib (wire.md
# recipe) and compared with the frame and with what tshark shows.
#
# Wireshark 4.0 does not parse XRC: after the BTH of an XRC opcode it shows
# everything, ICRC included, as one "vendor" field, which is compared whole.
#
# Usage: roce_tshark.sh <path of roce_pcap_gen>. Exit 77 (skip) without tshark.
set -euo pipefail
gen=$1
if ! command -v tshark >/dev/null 2>&1; then
  echo "tshark not installed: skipping" >&2
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pcap=$dir/roce.pcap
expect=$dir/roce.expect
"$gen" "$pcap" "$expect"

# Spurious errors otherwise: the RPCoRDMA heuristic claims short SEND payloads.
ts() {
  tshark -r "$pcap" --disable-heuristic rpcrdma_infiniband -o ip.check_checksum:TRUE \
    -o udp.check_checksum:TRUE "$@" 2>/dev/null
}
failures=0

bad=$(ts -Y '_ws.malformed || _ws.expert.severity >= "Warning"' -T fields -e frame.number | wc -l)
if [[ "$bad" != 0 ]] || ts -V | grep -qi malformed; then
  echo "FAIL: tshark reports malformed frames or expert warnings" >&2
  ts -V | grep -i -B3 'malformed\|expert' >&2 || true
  failures=$((failures + 1))
fi

fields=$(cut -f2 "$expect" | sort -u | tr '\n' ' ')
fields="$fields infiniband.invariant.crc"
args=()
for f in $fields; do args+=(-e "$f"); done
ts -T fields -E separator=/t -E occurrence=a -E aggregator='|' -e frame.number "${args[@]}" >"$dir/decoded.tsv"

python3 - "$pcap" "$expect" "$dir/decoded.tsv" "$fields" <<'PY' || failures=$((failures + 1))
import struct, sys, zlib

pcap_path, expect_path, decoded_path, fields = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split()

# Frames from the pcap (classic format, little-endian headers).
data = open(pcap_path, 'rb').read()
frames, off = [], 24
while off < len(data):
    _, _, incl, _ = struct.unpack_from('<IIII', data, off)
    frames.append(data[off + 16: off + 16 + incl])
    off += 16 + incl

def icrc(frame):
    """wire.md: zlib.crc32 of 8 x ff + masked IP, UDP, BTH + the rest, little-endian."""
    ethertype = int.from_bytes(frame[12:14], 'big')
    if ethertype == 0x0800:
        ip = bytearray(frame[14:34]); ip[1] = 0xff; ip[8] = 0xff; ip[10:12] = b'\xff\xff'
    else:
        ip = bytearray(frame[14:54]); ip[0] |= 0x0f; ip[1:4] = b'\xff\xff\xff'; ip[7] = 0xff
    at = 14 + len(ip)
    udp = bytearray(frame[at:at + 8]); udp[6:8] = b'\xff\xff'
    bth = bytearray(frame[at + 8:at + 20]); bth[4] = 0xff
    return struct.pack('<I', zlib.crc32(b'\xff' * 8 + ip + udp + bth + frame[at + 20:-4]) & 0xffffffff)

expected = {}
for line in open(expect_path):
    n, field, kind, value = line.rstrip('\n').split('\t')
    expected.setdefault(int(n), {})[field] = (kind, value)

# Fields that occur more than once: infiniband.immdt and .ieth show their
# value twice (take the first); infiniband.vendor is 4 bytes, then the whole
# (take the last); infiniband.reserved is BTH byte 4 first.
decoded = {}
for line in open(decoded_path):
    cols = line.rstrip('\n').split('\t')
    cols += [''] * (len(fields) + 1 - len(cols))
    decoded[int(cols[0])] = {f: v.split('|')[-1 if f == 'infiniband.vendor' else 0]
                             for f, v in zip(fields, cols[1:])}

bad = 0
def fail(msg):
    global bad
    bad += 1
    print('FAIL ' + msg)

if not (len(frames) == len(expected) == len(decoded) > 0):
    fail('frame counts: pcap %d, expected %d, decoded %d' % (len(frames), len(expected), len(decoded)))

def number(text):
    text = text.split()[0]
    return int(text == 'True') if text in ('True', 'False') else int(text, 0)

for n in sorted(expected):
    frame, got, want = frames[n - 1], decoded.get(n, {}), expected[n]
    crc = icrc(frame)
    checked, bad_before = 0, bad
    if frame[-4:] != crc:
        fail('frame %d: ICRC on the wire %s, zlib says %s' % (n, frame[-4:].hex(), crc.hex()))
    shown = got.get('infiniband.invariant.crc', '')
    if 'infiniband.vendor' in want:  # XRC: the ICRC is inside the vendor bytes
        if shown:
            fail('frame %d: tshark found an ICRC field in an XRC frame' % n)
    elif not shown or int(shown, 16) != int.from_bytes(crc, 'big'):
        fail('frame %d: tshark shows ICRC %r, zlib says %s' % (n, shown, crc.hex()))
    for field in fields:
        if field == 'infiniband.invariant.crc':
            continue
        value = got.get(field, '')
        if field not in want:
            # A header the opcode does not carry must not be found.
            if field.startswith(('infiniband.', 'data.')) and value:
                fail('frame %d: unexpected %s = %s' % (n, field, value))
            continue
        kind, w = want[field]
        if kind == 'num':
            ok = value != '' and number(value) == int(w)
        elif kind == 'str':
            ok = value == w
        else:
            w = w + (crc.hex() if kind == 'hex+icrc' else '')
            ok = value.replace(':', '').lower() == w
        if not ok:
            fail('frame %d: %s = %r, want %s' % (n, field, value, w))
        checked += 1
    print('%s frame %2d: opcode %3s, %2d fields, ICRC %s' % ('ok  ' if bad == bad_before else 'FAIL', n,
                                                         got.get('infiniband.bth.opcode'), checked, crc.hex()))
sys.exit(1 if bad else 0)
PY

if ((failures)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all RoCEv2 frames decoded by tshark as built"
