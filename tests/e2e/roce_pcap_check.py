#!/usr/bin/env python3
"""Checks capture files of RoCEv2 frames (SOFTVERBS_PCAP, or a link capture).

  roce_pcap_check.py [--expect PATTERNS] [--psn] [--disjoint] FILE...

For every FILE:
  * tshark decodes every frame as InfiniBand (RoCEv2), none malformed and
    none with an expert warning;
  * the ICRC of every frame is recomputed here with zlib (the wire.md
    recipe: 8 bytes of ones, then the IP, UDP and BTH headers with the
    variant fields masked to ones, then the rest up to the ICRC) and must
    equal the 4 bytes the frame ends with;
  * with --psn: per connection (IP pair and UDP source port: RC gives both
    directions the same port) request PSNs advance without gaps (a PSN at
    or before the expected one is a retransmission), and every response
    acknowledges or answers a PSN that was requested. Meant for captures
    that lose nothing (the intra-host path).
Over all FILEs:
  * --expect: comma-separated opcode names as Linux ib_pack.h spells them
    without IB_OPCODE_ (RC_SEND_FIRST, UD_SEND_ONLY, RC_ACKNOWLEDGE, ...),
    fnmatch patterns allowed (RC_RDMA_READ_RESPONSE_*): each must match at
    least one frame, as tshark decodes its opcode;
  * --disjoint: no request (opcode, destination QP, PSN) is in two files:
    a message is written by one process only.
Exit 0 when everything holds, 1 otherwise, 77 without tshark.
"""
import argparse
import fnmatch
import os
import shutil
import struct
import subprocess
import sys
import zlib

OPERATIONS = {
    0x00: 'SEND_FIRST', 0x01: 'SEND_MIDDLE', 0x02: 'SEND_LAST', 0x03: 'SEND_LAST_WITH_IMMEDIATE',
    0x04: 'SEND_ONLY', 0x05: 'SEND_ONLY_WITH_IMMEDIATE', 0x06: 'RDMA_WRITE_FIRST', 0x07: 'RDMA_WRITE_MIDDLE',
    0x08: 'RDMA_WRITE_LAST', 0x09: 'RDMA_WRITE_LAST_WITH_IMMEDIATE', 0x0A: 'RDMA_WRITE_ONLY',
    0x0B: 'RDMA_WRITE_ONLY_WITH_IMMEDIATE', 0x0C: 'RDMA_READ_REQUEST', 0x0D: 'RDMA_READ_RESPONSE_FIRST',
    0x0E: 'RDMA_READ_RESPONSE_MIDDLE', 0x0F: 'RDMA_READ_RESPONSE_LAST', 0x10: 'RDMA_READ_RESPONSE_ONLY',
    0x11: 'ACKNOWLEDGE', 0x12: 'ATOMIC_ACKNOWLEDGE', 0x13: 'COMPARE_SWAP', 0x14: 'FETCH_ADD',
    0x16: 'SEND_LAST_WITH_INVALIDATE', 0x17: 'SEND_ONLY_WITH_INVALIDATE',
}
TRANSPORTS = {0x00: 'RC', 0x20: 'UC', 0x60: 'UD', 0xA0: 'XRC'}
RESPONSES = range(0x0D, 0x13)  # READ responses, ACKNOWLEDGE, ATOMIC ACKNOWLEDGE


def opcode_name(op):
    t, o = TRANSPORTS.get(op & 0xE0), OPERATIONS.get(op & 0x1F)
    return '%s_%s' % (t, o) if t and o else 'OPCODE_%#04x' % op


# Frames tshark finds malformed or warns about. Not those where it took the
# application's payload for a raw ethertype (the IB dissector does when a
# payload's first 2 bytes are a known ethertype and the next 2 are zero:
# perftest's ib_read_lat buffer, read whole as 2 bytes 90 00 and 2 bytes of
# pad, became an empty "loopback" frame, and the test failed in one CI run
# of ten): those bytes are the application's, not our encoding.
FLAGGED = '(_ws.malformed || _ws.expert.severity >= "Warning") && !(frame.protocols contains "infiniband:ethertype")'


def tshark(path, *args):
    # tshark is not under test: not with our library or a sanitizer runtime.
    env = {k: v for k, v in os.environ.items() if k not in ('LD_PRELOAD', 'LD_LIBRARY_PATH', 'SOFTVERBS_PCAP')}
    # The RPCoRDMA heuristic claims short SEND payloads and calls them malformed.
    cmd = ['tshark', '-r', path, '--disable-heuristic', 'rpcrdma_infiniband'] + list(args)
    return subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True).stdout


def frames_of(path):
    data = open(path, 'rb').read()
    frames = []
    magic = struct.unpack_from('<I', data, 0)[0] if len(data) >= 4 else 0
    if magic in (0xA1B2C3D4, 0xA1B23C4D):
        off = 24
        while off + 16 <= len(data):
            _, _, incl, _ = struct.unpack_from('<IIII', data, off)
            frames.append(data[off + 16:off + 16 + incl])
            off += 16 + incl
    else:  # pcapng: enhanced packet blocks
        off = 0
        while off + 8 <= len(data):
            btype, blen = struct.unpack_from('<II', data, off)
            if btype == 6:
                cap = struct.unpack_from('<I', data, off + 20)[0]
                frames.append(data[off + 28:off + 28 + cap])
            off += max(blen, 12)
    return frames


class Frame:
    """The fields of a RoCEv2 Ethernet frame the checks need."""

    def __init__(self, f):
        ethertype = int.from_bytes(f[12:14], 'big')
        if ethertype == 0x0800:
            ip = bytearray(f[14:34])
            self.src, self.dst = bytes(f[26:30]), bytes(f[30:34])
            end = 14 + int.from_bytes(f[16:18], 'big')
            ip[1] = 0xFF; ip[8] = 0xFF; ip[10:12] = b'\xff\xff'
        else:
            ip = bytearray(f[14:54])
            self.src, self.dst = bytes(f[22:38]), bytes(f[38:54])
            end = 54 + int.from_bytes(f[18:20], 'big')
            ip[0] |= 0x0F; ip[1:4] = b'\xff\xff\xff'; ip[7] = 0xFF
        at = 14 + len(ip)
        udp = bytearray(f[at:at + 8])
        self.sport = int.from_bytes(udp[0:2], 'big')
        udp[6:8] = b'\xff\xff'
        bth = bytearray(f[at + 8:at + 20])
        self.opcode = bth[0]
        self.destqp = int.from_bytes(bth[5:8], 'big')
        self.psn = int.from_bytes(bth[9:12], 'big')
        bth[4] = 0xFF
        crc = zlib.crc32(b'\xff' * 8 + ip + udp + bth + f[at + 20:end - 4]) & 0xFFFFFFFF
        self.icrc_ok = struct.pack('<I', crc) == f[end - 4:end]
        self.icrc, self.wire_icrc = crc, f[end - 4:end].hex()

    def is_response(self):
        return (self.opcode & 0x1F) in RESPONSES


def psn_before(a, b):  # a precedes b on the 24-bit circle
    return ((a - b) & 0xFFFFFF) & 0x800000 != 0


def check_psns(frames):
    errors = []
    nxt = {}
    for i, fr in enumerate(frames, 1):
        if fr.opcode & 0xE0 == 0x60:  # UD: a PSN sequence per sending QP (port from its QPN)
            key = ('ud', fr.src, fr.sport)
        else:  # RC, UC, XRC: the connection; RC's port is the same both ways
            key = ('c', min(fr.src, fr.dst), max(fr.src, fr.dst), fr.sport)
        expected = nxt.get(key)
        if expected is None:
            if fr.is_response():
                errors.append('frame %d: %s PSN %#x answers nothing requested' % (i, opcode_name(fr.opcode), fr.psn))
                continue
            expected = fr.psn
        if fr.psn == expected and (not fr.is_response() or (fr.opcode & 0x1F) in range(0x0D, 0x11)):
            nxt[key] = (fr.psn + 1) & 0xFFFFFF  # a new request packet, or the next READ response
        elif not psn_before(fr.psn, expected):
            errors.append('frame %d: %s PSN %#x, expected %#x or an earlier one' %
                          (i, opcode_name(fr.opcode), fr.psn, expected))
    return errors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--expect', default='')
    ap.add_argument('--psn', action='store_true')
    ap.add_argument('--disjoint', action='store_true')
    ap.add_argument('files', nargs='+')
    a = ap.parse_args()
    if not shutil.which('tshark'):
        print('tshark not installed')
        return 77
    ok = True
    seen_names = {}
    requests = {}
    for path in a.files:
        name = os.path.basename(path)
        # One pass for every frame's BTH opcode (empty: not decoded as
        # InfiniBand), one for the flagged frames: tshark takes ~0.7 s of
        # CPU to start, and there were four passes per file.
        opcodes = [line.strip() for line in tshark(path, '-T', 'fields', '-e', 'infiniband.bth.opcode').splitlines()]
        total = len(opcodes)
        roce = sum(1 for op in opcodes if op)
        bad = len(tshark(path, '-Y', FLAGGED).splitlines())
        print('%s: %d packets, %d decoded as RoCE, %d malformed or flagged' % (name, total, roce, bad))
        if total == 0 or roce != total or bad:
            print(tshark(path, '-Y', FLAGGED, '-V')[:6000])
            ok = False
        for op in filter(None, opcodes):
            n = opcode_name(int(op.split(',')[0], 0))
            seen_names[n] = seen_names.get(n, 0) + 1
        frames = [Frame(f) for f in frames_of(path)]
        wrong = [(i, fr) for i, fr in enumerate(frames, 1) if not fr.icrc_ok]
        for i, fr in wrong[:20]:
            print('  frame %d: ICRC %08x, wire %s' % (i, fr.icrc, fr.wire_icrc))
        print('  ICRC recomputed on %d frames, %d wrong' % (len(frames), len(wrong)))
        if wrong or not frames:
            ok = False
        if a.psn:
            errors = check_psns(frames)
            for e in errors[:20]:
                print('  ' + e)
            print('  PSNs: %d inconsistencies' % len(errors))
            ok = ok and not errors
        if a.disjoint:
            for fr in frames:
                if not fr.is_response():
                    requests.setdefault((fr.opcode, fr.destqp, fr.psn), set()).add(path)
    print('opcodes: ' + ', '.join('%s %d' % (n, c) for n, c in sorted(seen_names.items())))
    for pattern in filter(None, a.expect.split(',')):
        if not any(fnmatch.fnmatchcase(n, pattern) for n in seen_names):
            print('no %s packet' % pattern)
            ok = False
    if a.disjoint:
        twice = [k for k, files in requests.items() if len(files) > 1]
        print('requests written by more than one process: %d' % len(twice))
        ok = ok and not twice
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
