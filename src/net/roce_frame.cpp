#include "roce_frame.h"

#include <cstring>

#include "icrc.h"

namespace sv::net {
namespace {

using namespace be;

constexpr uint16_t kEtherTypeIpv4 = 0x0800, kEtherTypeIpv6 = 0x86DD;
constexpr uint8_t kIpProtoUdp = 17;
constexpr uint16_t kIpv4DontFragment = 0x4000, kIpv4FragmentBits = 0x3FFF;  // MF + offset
constexpr size_t kMaxIpPayload = 0xFFFF;

// The RFC 1071 one's-complement sum, not yet folded or complemented.
uint32_t sum16(uint32_t sum, const uint8_t* p, size_t n) {
  for (; n >= 2; p += 2, n -= 2) sum += get16(p);
  if (n) sum += uint32_t{p[0]} << 8;
  return sum;
}

uint16_t fold(uint32_t sum) {
  while (sum >> 16) sum = (sum & 0xFFFF) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

// The UDP checksum's IPv6 pseudo-header (RFC 8200 8.1) plus the segment.
uint16_t udp6_checksum(const uint8_t* ip6, const uint8_t* udp, size_t udp_len) {
  uint32_t sum = sum16(0, ip6 + 8, 32);  // source and destination addresses
  sum += static_cast<uint32_t>(udp_len >> 16) + static_cast<uint32_t>(udp_len & 0xFFFF) + kIpProtoUdp;
  return static_cast<uint16_t>(~fold(sum16(sum, udp, udp_len)));
}

uint16_t udp4_checksum(const uint8_t* ip4, const uint8_t* udp, size_t udp_len) {
  uint32_t sum = sum16(0, ip4 + 12, 8);  // source and destination addresses
  sum += static_cast<uint32_t>(udp_len) + kIpProtoUdp;
  return static_cast<uint16_t>(~fold(sum16(sum, udp, udp_len)));
}

void put_ipv4(uint8_t* ip, const FrameAddrs& a, size_t udp_len) {
  ip[0] = 0x45;  // version 4, 5 words
  ip[1] = a.traffic_class;
  put16(ip + 2, static_cast<uint16_t>(kIpv4HeaderBytes + udp_len));
  put16(ip + 4, 0);  // identification: meaningless with DF set (RFC 6864)
  put16(ip + 6, kIpv4DontFragment);
  ip[8] = a.hop_limit;
  ip[9] = kIpProtoUdp;
  put16(ip + 10, 0);
  std::memcpy(ip + 12, a.src_ip.s6_addr + 12, 4);
  std::memcpy(ip + 16, a.dst_ip.s6_addr + 12, 4);
  put16(ip + 10, static_cast<uint16_t>(~fold(sum16(0, ip, kIpv4HeaderBytes))));
}

void put_ipv6(uint8_t* ip, const FrameAddrs& a, size_t udp_len) {
  put32(ip, 6u << 28 | uint32_t{a.traffic_class} << 20 | (a.flow_label & 0xFFFFF));
  put16(ip + 4, static_cast<uint16_t>(udp_len));
  ip[6] = kIpProtoUdp;
  ip[7] = a.hop_limit;
  std::memcpy(ip + 8, a.src_ip.s6_addr, 16);
  std::memcpy(ip + 24, a.dst_ip.s6_addr, 16);
}

bool fail(ParsedFrame* out, FrameError e) {
  out->error = e;
  return false;
}

// Reads the IP header at `ip` (`len` bytes to the end of the frame) into
// out->addrs and says how long it is and how many bytes it says follow it.
bool parse_ip(const uint8_t* ip, size_t len, uint16_t ether_type, ParsedFrame* out, size_t* header,
              size_t* payload) {
  FrameAddrs& a = out->addrs;
  if (ether_type == kEtherTypeIpv4) {
    if (len < kIpv4HeaderBytes || ip[0] >> 4 != 4) return fail(out, FrameError::kMalformed);
    if (ip[9] != kIpProtoUdp) return fail(out, FrameError::kNotRoce);
    size_t ihl = size_t{ip[0] & 0x0Fu} * 4, total = get16(ip + 2);
    bool fragment = (get16(ip + 6) & kIpv4FragmentBits) != 0;  // RoCE never fragments
    if (ihl < kIpv4HeaderBytes || total < ihl || total > len || fragment || fold(sum16(0, ip, ihl)) != 0xFFFF)
      return fail(out, FrameError::kMalformed);
    a.traffic_class = ip[1];
    a.hop_limit = ip[8];
    a.src_ip = v4_mapped(0);
    a.dst_ip = v4_mapped(0);
    std::memcpy(a.src_ip.s6_addr + 12, ip + 12, 4);
    std::memcpy(a.dst_ip.s6_addr + 12, ip + 16, 4);
    *header = ihl;
    *payload = total - ihl;
    return true;
  }
  if (len < kIpv6HeaderBytes || ip[0] >> 4 != 6) return fail(out, FrameError::kMalformed);
  if (ip[6] != kIpProtoUdp) return fail(out, FrameError::kNotRoce);  // RoCE uses no extension headers
  *payload = get16(ip + 4);
  if (*payload > len - kIpv6HeaderBytes) return fail(out, FrameError::kMalformed);
  uint32_t word0 = get32(ip);
  a.traffic_class = static_cast<uint8_t>(word0 >> 20);
  a.flow_label = word0 & 0xFFFFF;
  a.hop_limit = ip[7];
  std::memcpy(a.src_ip.s6_addr, ip + 8, 16);
  std::memcpy(a.dst_ip.s6_addr, ip + 24, 16);
  *header = kIpv6HeaderBytes;
  return true;
}

}  // namespace

in6_addr v4_mapped(uint32_t ipv4_be) {
  in6_addr a{};
  a.s6_addr[10] = a.s6_addr[11] = 0xFF;
  std::memcpy(a.s6_addr + 12, &ipv4_be, 4);
  return a;
}

bool is_multicast(const in6_addr& a) {
  return a.s6_addr[0] == 0xff || (is_v4_mapped(a) && (a.s6_addr[12] & 0xf0) == 0xe0);
}

bool FrameAddrs::ipv4() const { return is_v4_mapped(src_ip); }

std::vector<uint8_t> build_frame(const FrameAddrs& addrs, const RocePacket& pkt, const uint8_t* payload,
                                 size_t len) {
  const OpcodeInfo* info = opcode_info(pkt.bth.opcode);
  bool v4 = addrs.ipv4();
  if (!info || (len > 0 && !info->is(kPayload)) || v4 != is_v4_mapped(addrs.dst_ip)) return {};
  uint8_t pad = pad_for(len);
  size_t ip_header = v4 ? kIpv4HeaderBytes : kIpv6HeaderBytes;
  size_t udp_len = kUdpHeaderBytes + info->header_bytes + len + pad + kIcrcBytes;
  if (udp_len + (v4 ? ip_header : 0) > kMaxIpPayload) return {};

  std::vector<uint8_t> f(kEthHeaderBytes + ip_header + udp_len);
  uint8_t* ip = f.data() + kEthHeaderBytes;
  uint8_t* udp = ip + ip_header;
  uint8_t* bth = udp + kUdpHeaderBytes;
  std::memcpy(f.data(), addrs.dst_mac, 6);
  std::memcpy(f.data() + 6, addrs.src_mac, 6);
  put16(f.data() + 12, v4 ? kEtherTypeIpv4 : kEtherTypeIpv6);
  if (v4)
    put_ipv4(ip, addrs, udp_len);
  else
    put_ipv6(ip, addrs, udp_len);
  put16(udp, addrs.udp_sport);
  put16(udp + 2, addrs.udp_dport);
  put16(udp + 4, static_cast<uint16_t>(udp_len));
  put16(udp + 6, 0);  // IPv4: none, as rxe sends; IPv6: filled in last

  RocePacket with_pad = pkt;
  with_pad.bth.pad = pad;
  uint8_t* data = bth + encode_headers(with_pad, bth);
  if (len) std::memcpy(data, payload, len);  // the pad after it is already zero
  uint8_t* icrc_at = f.data() + f.size() - kIcrcBytes;
  uint32_t crc = icrc(ip, static_cast<size_t>(icrc_at - ip));
  for (size_t i = 0; i < kIcrcBytes; ++i) icrc_at[i] = static_cast<uint8_t>(crc >> (8 * i));  // little-endian

  if (!v4) {  // last: it covers the ICRC (and the ICRC does not cover it)
    uint16_t csum = udp6_checksum(ip, udp, udp_len);
    put16(udp + 6, csum == 0 ? 0xFFFF : csum);
  }
  return f;
}

const char* to_string(FrameError e) {
  switch (e) {
    case FrameError::kNone: return "ok";
    case FrameError::kNotRoce: return "not RoCEv2";
    case FrameError::kMalformed: return "malformed";
    case FrameError::kBadIcrc: return "bad ICRC";
  }
  return "?";
}

bool parse_frame(const uint8_t* frame, size_t len, ParsedFrame* out, uint16_t udp_port) {
  *out = ParsedFrame{};
  if (len < kEthHeaderBytes) return fail(out, FrameError::kMalformed);
  uint16_t ether_type = get16(frame + 12);
  if (ether_type != kEtherTypeIpv4 && ether_type != kEtherTypeIpv6) return fail(out, FrameError::kNotRoce);
  std::memcpy(out->addrs.dst_mac, frame, 6);
  std::memcpy(out->addrs.src_mac, frame + 6, 6);

  const uint8_t* ip = frame + kEthHeaderBytes;
  size_t ip_header = 0, ip_payload = 0;
  if (!parse_ip(ip, len - kEthHeaderBytes, ether_type, out, &ip_header, &ip_payload)) return false;
  if (ip_payload < kUdpHeaderBytes) return fail(out, FrameError::kMalformed);
  const uint8_t* udp = ip + ip_header;
  out->addrs.udp_sport = get16(udp);
  out->addrs.udp_dport = get16(udp + 2);
  if (out->addrs.udp_dport != udp_port) return fail(out, FrameError::kNotRoce);
  size_t udp_len = get16(udp + 4);
  if (udp_len > ip_payload || udp_len < kUdpHeaderBytes + kBthBytes + kIcrcBytes)
    return fail(out, FrameError::kMalformed);
  if (get16(udp + 6) != 0) {
    bool v4 = ether_type == kEtherTypeIpv4;
    if ((v4 ? udp4_checksum(ip, udp, udp_len) : udp6_checksum(ip, udp, udp_len)) != 0)
      return fail(out, FrameError::kMalformed);
  }

  const uint8_t* bth = udp + kUdpHeaderBytes;
  size_t roce_len = udp_len - kUdpHeaderBytes - kIcrcBytes;
  const uint8_t* wire = bth + roce_len;
  uint32_t want = uint32_t{wire[0]} | uint32_t{wire[1]} << 8 | uint32_t{wire[2]} << 16 | uint32_t{wire[3]} << 24;
  if (icrc(ip, static_cast<size_t>(wire - ip)) != want) return fail(out, FrameError::kBadIcrc);
  if (!decode(bth, roce_len, &out->packet)) return fail(out, FrameError::kMalformed);
  return true;
}

}  // namespace sv::net
