#include "roce_datagram.h"

#include <zlib.h>

#include <array>
#include <cstring>

#include "icrc.h"
#include "roce_frame.h"

namespace sv::net {
namespace {

using namespace be;

constexpr size_t kIpIdOffset = 4;

bool ipv4(const DatagramAddrs& a) { return is_v4_mapped(a.src_ip); }

// Writes the IP and UDP headers that carry a `len`-byte datagram just before
// buf + kDatagramHeadroom; returns where the IP header starts. Fields the
// ICRC masks (TOS, TTL, checksums, flow label) are left zero.
uint8_t* put_ip_udp(const DatagramAddrs& a, uint8_t* buf, size_t len) {
  uint8_t* udp = buf + kDatagramHeadroom - kUdpHeaderBytes;
  const size_t udp_len = kUdpHeaderBytes + len;
  put16(udp, a.src_port);
  put16(udp + 2, a.dst_port);
  put16(udp + 4, static_cast<uint16_t>(udp_len));
  put16(udp + 6, 0);
  if (ipv4(a)) {
    uint8_t* ip = udp - kIpv4HeaderBytes;
    std::memset(ip, 0, kIpv4HeaderBytes);
    ip[0] = 0x45;
    put16(ip + 2, static_cast<uint16_t>(kIpv4HeaderBytes + udp_len));
    put16(ip + 6, 0x4000);  // DF
    ip[9] = 17;
    std::memcpy(ip + 12, a.src_ip.s6_addr + 12, 4);
    std::memcpy(ip + 16, a.dst_ip.s6_addr + 12, 4);
    return ip;
  }
  uint8_t* ip = udp - kIpv6HeaderBytes;
  std::memset(ip, 0, kIpv6HeaderBytes);
  ip[0] = 0x60;
  put16(ip + 4, static_cast<uint16_t>(udp_len));
  ip[6] = 17;
  std::memcpy(ip + 8, a.src_ip.s6_addr, 16);
  std::memcpy(ip + 24, a.dst_ip.s6_addr, 16);
  return ip;
}

// The change of the ICRC when bit `b` of the IP ID flips, for an IPv4
// packet of `ip_len` bytes (ICRC excluded): a CRC-32 is affine, so the change
// is that of the bit's CRC alone, carried over the bytes that follow it
// (multiplied by x^(8 * follows) mod P: zlib's crc32_combine_op, with the
// power made once per size by crc32_combine_gen).
uint32_t id_bit_delta(unsigned b, uLong follow_op) {
  // The bit's own CRC: the same for every size (computed once).
  static const auto kBitCrcs = [] {
    std::array<uLong, 16> crcs{};
    for (unsigned bit = 0; bit < 16; ++bit) {
      uint8_t with[8 + kIpIdOffset + 2] = {}, without[sizeof with] = {};
      with[8 + kIpIdOffset + (bit < 8 ? 1 : 0)] = static_cast<uint8_t>(1u << (bit & 7));
      crcs[bit] = crc32(0, with, sizeof with) ^ crc32(0, without, sizeof without);
    }
    return crcs;
  }();
  return static_cast<uint32_t>(crc32_combine_op(kBitCrcs[b], 0, follow_op));
}

// What the 16 ID bits change in the ICRC of packets of `ip_len` bytes: a
// reduced basis of their span, and the change of each 4-bit digit.
struct IdDeltas {
  size_t ip_len = 0;
  uint32_t basis[32] = {};  // basis[i]: a reduced vector whose top bit is i
  // The change each 4-bit digit of an ID makes: four loads for a packet
  // sent (set_icrc_ip_id), where a loop over the 16 bits was ~100
  // instructions. (Nibbles, not bytes: the cache is in every thread's TLS.)
  uint32_t nibble[4][16] = {};
};

// The deltas of the last few sizes, per thread. One size was kept before:
// a ping-pong of two-packet messages sends and receives three sizes in
// turn (a full segment, the last one, the ACK it carries), and made them
// all again for every message with crc32_combine per bit: ~15 us more
// per message (ib_send_lat -s 8192 at path MTU 4096, t_min 33 against 14
// us for one packet). A flow's sizes stay in these entries.
constexpr size_t kIdDeltaSizes = 8;
struct IdDeltaCache {
  IdDeltas entries[kIdDeltaSizes];
  size_t next = 0;  // the entry a new size takes (round robin)
};
thread_local IdDeltaCache t_id_deltas;

const IdDeltas& id_deltas(size_t ip_len) {
  IdDeltaCache& cache = t_id_deltas;
  for (const IdDeltas& e : cache.entries)
    if (e.ip_len == ip_len) return e;
  IdDeltas& d = cache.entries[cache.next];
  cache.next = (cache.next + 1) % kIdDeltaSizes;
  d = IdDeltas{};
  d.ip_len = ip_len;
  const uLong follow_op = crc32_combine_gen64(static_cast<z_off64_t>(ip_len - kIpIdOffset - 2));
  uint32_t delta[16];  // what each ID bit changes
  for (unsigned b = 0; b < 16; ++b) {
    delta[b] = id_bit_delta(b, follow_op);
    uint32_t v = delta[b];
    for (int i = 31; i >= 0 && v; --i) {
      if (!(v >> i & 1)) continue;
      if (!d.basis[i]) {
        d.basis[i] = v;
        v = 0;
      } else {
        v ^= d.basis[i];
      }
    }
  }
  for (unsigned digit = 0; digit < 4; ++digit)
    for (unsigned x = 1; x < 16; ++x)  // (x's lowest bit, added to x without it)
      d.nibble[digit][x] = d.nibble[digit][x & (x - 1)] ^ delta[4 * digit + static_cast<unsigned>(__builtin_ctz(x))];
  return d;
}

// Whether `target` is a sum (xor) of some of the 16 ID-bit deltas.
bool in_id_span(uint32_t target, size_t ip_len) {
  const IdDeltas& d = id_deltas(ip_len);
  for (int i = 31; i >= 0 && target; --i)
    if (target >> i & 1) {
      if (!d.basis[i]) return false;
      target ^= d.basis[i];
    }
  return target == 0;
}

uint32_t wire_icrc(const uint8_t* p) {
  // icrc() returns the number whose little-endian bytes are on the wire.
  return uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
}

}  // namespace

void set_icrc_ip_id(uint8_t* at, size_t len, uint16_t id) {
  if (len < kBthBytes + kIcrcBytes || id == 0) return;
  const size_t ip_len = kIpv4HeaderBytes + kUdpHeaderBytes + len - kIcrcBytes;
  const IdDeltas& d = id_deltas(ip_len);
  const uint32_t change =
      d.nibble[0][id & 0xF] ^ d.nibble[1][id >> 4 & 0xF] ^ d.nibble[2][id >> 8 & 0xF] ^ d.nibble[3][id >> 12];
  uint8_t* crc = at + len - kIcrcBytes;
  const uint32_t now = wire_icrc(crc) ^ change;
  crc[0] = static_cast<uint8_t>(now);
  crc[1] = static_cast<uint8_t>(now >> 8);
  crc[2] = static_cast<uint8_t>(now >> 16);
  crc[3] = static_cast<uint8_t>(now >> 24);
}

size_t build_datagram(const DatagramAddrs& a, const RocePacket& pkt, const uint8_t* payload, size_t len,
                      uint8_t* buf, bool icrc) {
  const OpcodeInfo* info = opcode_info(pkt.bth.opcode);
  if (!info) return 0;
  uint8_t* at = buf + kDatagramHeadroom;
  RocePacket p = pkt;
  p.bth.pad = pad_for(len);
  size_t n = encode_headers(p, at);
  if (!n) return 0;
  if (len) std::memcpy(at + n, payload, len);
  n += len;
  std::memset(at + n, 0, p.bth.pad);
  n += p.bth.pad;
  if (icrc) put_datagram_icrc(a, buf, n + kIcrcBytes);
  return n + kIcrcBytes;
}

void put_datagram_icrc(const DatagramAddrs& a, uint8_t* buf, size_t len) {
  if (len < kBthBytes + kIcrcBytes) return;
  uint8_t* end = buf + kDatagramHeadroom + len - kIcrcBytes;
  uint8_t* ip = put_ip_udp(a, buf, len);
  const uint32_t crc = icrc(ip, static_cast<size_t>(end - ip));
  end[0] = static_cast<uint8_t>(crc);
  end[1] = static_cast<uint8_t>(crc >> 8);
  end[2] = static_cast<uint8_t>(crc >> 16);
  end[3] = static_cast<uint8_t>(crc >> 24);
}

bool datagram_icrc_ok(const DatagramAddrs& a, const uint8_t* buf, size_t len) {
  if (len < kBthBytes + kIcrcBytes) return false;
  const uint8_t* at = buf + kDatagramHeadroom;
  // The headers go in a buffer of their own: buf's headroom may be the end
  // of the packet before (a GRO buffer's segments), still to be placed.
  uint8_t headers[kDatagramHeadroom];
  const uint8_t* ip = put_ip_udp(a, headers, len);
  const size_t ip_udp_len = static_cast<size_t>(headers + kDatagramHeadroom - ip);
  const size_t ip_len = ip_udp_len + len - kIcrcBytes;
  const uint32_t wire = wire_icrc(at + len - kIcrcBytes), with_id0 = icrc(ip, ip_udp_len, at, len - kIcrcBytes);
  if (wire == with_id0) return true;
  return ipv4(a) && in_id_span(wire ^ with_id0, ip_len);
}

}  // namespace sv::net
