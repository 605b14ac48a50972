#!/usr/bin/env bash
# The IB CM codec (src/ibcm) against an independent decoder: ibcm_pcap_gen
# writes RoCEv2 frames (UD SEND_ONLY to QP1, GSI Q_Key) carrying one CM MAD
# each, and Wireshark's InfiniBand dissector must read back every field
# with the value the generator put in, and find nothing malformed. The ICRC
# of every frame is recomputed here with Python's zlib (wire.md recipe).
#
# Wireshark 4.0 has no dissector for MRA, SIDR REQ and SIDR REP: for those
# the MAD header is checked through the dissector and the body through the
# raw payload bytes it shows (infiniband.mad.data), against hex written from
# the IBTA tables. Its REQ flow label and packet rate are not compared: 4.0
# reads them from the wrong bytes (it shows 0x00123 / 0x12 for the label
# 0x12345 and rate 7 that sit, as in Linux ibta_vol1_c12.h, in the 32-bit
# word at REQ byte 88: label in bits 31:12, rate in bits 5:0).
#
# Usage: ibcm_tshark.sh <path of ibcm_pcap_gen>. Exit 77 (skip) without tshark.
set -euo pipefail
gen=$1
if ! command -v tshark >/dev/null 2>&1; then
  echo "tshark not installed: skipping" >&2
  exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
pcap=$dir/cm.pcap
"$gen" "$pcap"

failures=0
ts() { tshark -r "$pcap" -o infiniband.try_heuristic_first:FALSE "$@" 2>/dev/null; }

# The checks are gathered first, then tshark runs once for every field of
# every frame (it takes ~0.7 s of CPU to start; once per check, this test
# spent 31 s on 20 starts), and each check reads its columns.
declare -a c_kind c_frame c_want c_fields
# check <frame> <expected, '|'-separated> <field>...
check() {
  c_kind+=(check) c_frame+=("$1") c_want+=("$2")
  shift 2
  c_fields+=("$*")
}
# starts <frame> <field> <hex prefix>: a bytes field begins with these bytes.
starts() { c_kind+=(starts) c_frame+=("$1") c_want+=("$3") c_fields+=("$2"); }

run_checks() {
  local -A column=()
  local fields=(frame.number) args=() f i got row
  for i in "${!c_fields[@]}"; do
    for f in ${c_fields[i]}; do
      [[ -n ${column[$f]+set} ]] || { column[$f]=${#fields[@]}; fields+=("$f"); }
    done
  done
  for f in "${fields[@]}"; do args+=(-e "$f"); done
  local rows
  mapfile -t rows < <(ts -T fields -E separator='|' -E occurrence=f "${args[@]}")
  for i in "${!c_kind[@]}"; do
    IFS='|' read -r -a row <<<"${rows[$((c_frame[i] - 1))]:-}"
    got=""
    for f in ${c_fields[i]}; do got+="${got:+|}${row[${column[$f]}]:-}"; done
    if [[ ${c_kind[i]} == check && $got == "${c_want[i]}" ]]; then
      echo "ok   frame ${c_frame[i]}: ${c_fields[i]}"
    elif [[ ${c_kind[i]} == starts && $got == "${c_want[i]}"* ]]; then
      echo "ok   frame ${c_frame[i]}: ${c_fields[i]} (${#c_want[i]} hex digits)"
    else
      echo "FAIL frame ${c_frame[i]}: ${c_fields[i]}" >&2
      echo "  want: ${c_want[i]}" >&2
      echo "  got:  $got" >&2
      failures=$((failures + 1))
    fi
  done
}

zeros() { printf '0%.0s' $(seq 1 "$1"); }

# Nothing malformed, no expert warnings or errors, every frame a CM MAD.
n=$(ts -T fields -e frame.number | wc -l)
[[ "$n" == 10 ]] || { echo "FAIL: $n frames, expected 10" >&2; exit 1; }
bad=$(ts -Y '_ws.malformed || _ws.expert.severity >= "Warning"' -T fields -e frame.number | wc -l)
if [[ "$bad" != 0 ]] || ts -V | grep -qi malformed; then
  echo "FAIL: tshark reports malformed frames or expert warnings" >&2
  ts -V | grep -i -B3 'malformed\|expert' >&2 || true
  failures=$((failures + 1))
fi

# Transport and MAD header of every frame.
attrs=(0x0010 0x0013 0x0014 0x0012 0x0015 0x0016 0x0011 0x0017 0x0018 0x0010)
tids=(0x0000000100000001 0x0000000200000001 0x0000000100000002 0x0000000200000002
      0x0000000100000003 0x0000000200000003 0x0000000200000004 0x0000000100000004
      0x0000000200000005 0x0000000100000005)
for i in $(seq 1 10); do
  check "$i" "4791|100|0x000001|0x0000000080010000|0x00000001|0x01|0x07|0x02|0x03|0x0000|0x0000|${tids[$((i - 1))]}|${attrs[$((i - 1))]}|0x00000000" \
    udp.dstport infiniband.bth.opcode infiniband.bth.destqp infiniband.deth.q_key infiniband.deth.srcqp \
    infiniband.mad.baseversion infiniband.mad.mgmtclass infiniband.mad.classversion infiniband.mad.method \
    infiniband.mad.status infiniband.mad.classspecific infiniband.mad.transactionid \
    infiniband.mad.attributeid infiniband.mad.attributemodifier
done

# REQ (IPv4), with rdma_cm's service ID and cma_hdr.
check 1 "0x11223344|0000000001|0x06|0x1d2f|0x0002c9fffe123456|0x01234567|0x0abcde|0x04|0x000000|0x03|0x000000" \
  infiniband.cm.req infiniband.cm.req.serviceid.prefix infiniband.cm.req.serviceid.protocol \
  infiniband.cm.req.serviceid.dport infiniband.cm.req.localcaguid infiniband.cm.req.localqkey \
  infiniband.cm.req.localqpn infiniband.cm.req.responderres infiniband.cm.req.localeecn \
  infiniband.cm.req.initdepth infiniband.cm.req.remoteeecn
check 1 "0x14|0x00|0x01|0x654321|0x12|0x07|0xffff|0x03|0x00|0x06|0x0f|0x01|0x00" \
  infiniband.cm.req.remoteresptout infiniband.cm.req.transpsvctype infiniband.cm.req.e2eflowctrl \
  infiniband.cm.req.startpsn infiniband.cm.req.localresptout infiniband.cm.req.retrcount \
  infiniband.cm.req.pkey infiniband.cm.req.pppmtu infiniband.cm.req.rdcexist \
  infiniband.cm.req.rnrretrcount infiniband.cm.req.maxcmretr infiniband.cm.req.srq \
  infiniband.cm.req.ext_transport
check 1 "65535|65535|10.0.0.1|10.0.0.2|0x68|0x40|0x05|0x00|0x0e|0|0" \
  infiniband.cm.req.prim_locallid infiniband.cm.req.prim_remotelid \
  infiniband.cm.req.prim_localgid_ipv4 infiniband.cm.req.prim_remotegid_ipv4 \
  infiniband.cm.req.prim_tfcclass infiniband.cm.req.prim_hoplim infiniband.cm.req.prim_sl \
  infiniband.cm.req.prim_subnetlocal infiniband.cm.req.prim_localacktout \
  infiniband.cm.req.alt_locallid infiniband.cm.req.alt_remotelid
check 1 "0x00|0x00|0x04|0x9c40|10.0.0.1|10.0.0.2" \
  infiniband.cm.req.ip_cm.majv infiniband.cm.req.ip_cm.minv infiniband.cm.req.ip_cm.ipv \
  infiniband.cm.req.ip_cm.sport infiniband.cm.req.ip_cm.sip4 infiniband.cm.req.ip_cm.dip4
# The user's private data follows the 36-byte cma_hdr: 92 - 36 = 56 bytes.
check 1 "75736572$(zeros 104)" infiniband.cm.req.ip_cm.private

# REQ (IPv6 cma_hdr; XRC, RDC exists, subnet local, SL 15).
check 10 "0x99aabbcc|0x03|0x01|0x01|0x0f|0x01|0x06|0x9c41|fd00::1|fd00::2" \
  infiniband.cm.req infiniband.cm.req.transpsvctype infiniband.cm.req.rdcexist \
  infiniband.cm.req.ext_transport infiniband.cm.req.prim_sl infiniband.cm.req.prim_subnetlocal \
  infiniband.cm.req.ip_cm.ipv infiniband.cm.req.ip_cm.sport infiniband.cm.req.ip_cm.sip6 \
  infiniband.cm.req.ip_cm.dip6

# REP.
check 2 "0x55667788|0x11223344|0x89abcdef|0x0bcdef|0x000000|0x123456|0x02|0x01|0x09|0x00|0x01|0x05|0x01|0x0002c9fffe654321" \
  infiniband.cm.rep infiniband.cm.rep.remotecommid infiniband.cm.rep.localqkey \
  infiniband.cm.rep.localqpn infiniband.cm.rep.localeecn infiniband.cm.rep.startpsn \
  infiniband.cm.rep.respres infiniband.cm.rep.initdepth infiniband.cm.rep.tgtackdelay \
  infiniband.cm.rep.failoveracc infiniband.cm.rep.e2eflowctrl infiniband.cm.rep.rnrretrcount \
  infiniband.cm.rep.srq infiniband.cm.rep.localcaguid
check 2 "7265702d64617461$(zeros $((2 * 196 - 16)))" infiniband.cm.rep.private

# RTU.
check 3 "0x11223344|0x55667788|$(zeros $((2 * 224)))" \
  infiniband.cm.rtu.localcommid infiniband.cm.rtu.remotecommid infiniband.cm.rtu.private

# REJ: REP rejected, 3 bytes of ARI, consumer defined (28).
check 4 "0x55667788|0x11223344|0x01|0x03|0x001c|a1a2a3$(zeros $((2 * 72 - 6)))" \
  infiniband.cm.rej.localcommid infiniband.cm.rej.remotecommid infiniband.cm.rej.msgrej \
  infiniband.cm.rej.rejinfolen infiniband.cm.rej.reason infiniband.cm.rej.ari
check 4 "6e6f2d7468616e6b73$(zeros $((2 * 148 - 18)))" infiniband.cm.rej.private

# DREQ (Wireshark files its remote QPN under the REQ field name).
check 5 "0x11223344|0x55667788|0x0bcdef|$(zeros $((2 * 220)))" \
  infiniband.cm.dreq.localcommid infiniband.cm.dreq.remotecommid infiniband.cm.req.remoteqpneecn \
  infiniband.cm.dreq.private

# DREP.
check 6 "0x55667788|0x11223344|$(zeros $((2 * 224)))" \
  infiniband.cm.drsp.localcommid infiniband.cm.drsp.remotecommid infiniband.cm.drsp.private

# MRA (IBTA table 107): comm IDs; byte 8 = message MRAed (REP = 1) << 6;
# byte 9 = service timeout (21) << 3; then 222 bytes of private data.
starts 7 infiniband.mad.data "556677881122334440a8$(zeros $((2 * 222)))"
# SIDR REQ (table 119): request ID, P_Key, 2 reserved, service ID
# (RDMA_PS_UDP, port 7471), then the cma_hdr: v0, IPv4, port 40000, addresses.
starts 8 infiniband.mad.data "cafef00dffff00000000000001111d2f00409c40$(zeros 24)0a000001$(zeros 24)0a000002$(zeros $((2 * 180)))"
# SIDR REP (table 120): request ID, status 0, info length 0, 2 reserved,
# QPN 0x0c0ffe + reserved byte, service ID, Q_Key, 72 + 136 bytes zero.
starts 9 infiniband.mad.data "cafef00d000000000c0ffe000000000001111d2f01234567$(zeros $((2 * 208)))"

run_checks

# ICRC: recomputed independently and compared with the frame and with what
# tshark shows (it prints the 4 wire bytes big-endian).
crcs=$(ts -T fields -e infiniband.invariant.crc | tr '\n' ' ')
python3 - "$pcap" "$crcs" <<'PY' || failures=$((failures + 1))
import struct, sys, zlib
data = open(sys.argv[1], 'rb').read()
shown = sys.argv[2].split()
off, i, bad = 24, 0, 0
while off < len(data):
    _, _, incl, _ = struct.unpack_from('<IIII', data, off)
    frame = data[off + 16: off + 16 + incl]
    off += 16 + incl
    ip = bytearray(frame[14:34]); ip[1] = 0xff; ip[8] = 0xff; ip[10:12] = b'\xff\xff'
    udp = bytearray(frame[34:42]); udp[6:8] = b'\xff\xff'
    bth = bytearray(frame[42:54]); bth[4] = 0xff
    icrc = struct.pack('<I', zlib.crc32(b'\xff' * 8 + ip + udp + bth + frame[54:-4]) & 0xffffffff)
    ok = frame[-4:] == icrc and int(shown[i], 16) == int.from_bytes(icrc, 'big')
    print(('ok  ' if ok else 'FAIL') + ' frame %d: ICRC %s' % (i + 1, icrc.hex()))
    bad += not ok
    i += 1
sys.exit(1 if bad or i != 10 else 0)
PY

if ((failures)); then
  echo "$failures check(s) failed" >&2
  exit 1
fi
echo "all CM messages decoded by tshark as encoded"
