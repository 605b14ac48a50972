// Whole RoCEv2 Ethernet frames: Ethernet / IPv4 or IPv6 / UDP / BTH /
// extension headers / payload / pad / ICRC, built and parsed the way Linux
// rxe puts them on the wire (rxe_net.c): IPv4 with DF set and UDP checksum
// 0; IPv6 with the UDP checksum filled in, since IPv6 requires it.
//
// Addresses are GIDs: an in6_addr, IPv4 in its v4-mapped form
// ::ffff:a.b.c.d, as RoCEv2 GID tables hold them.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "roce_header.h"
#include "udp_sport.h"

namespace sv::net {

inline constexpr size_t kEthHeaderBytes = 14;
inline constexpr size_t kIpv4HeaderBytes = 20;
inline constexpr size_t kIpv6HeaderBytes = 40;
inline constexpr size_t kUdpHeaderBytes = 8;

struct FrameAddrs {
  uint8_t src_mac[6]{}, dst_mac[6]{};
  in6_addr src_ip{}, dst_ip{};  // both v4-mapped (IPv4) or both not (IPv6)
  uint16_t udp_sport = kRoceSportBase;  // see udp_sport.h
  uint16_t udp_dport = kRoceUdpPort;
  uint8_t traffic_class = 0;  // IPv4 TOS or IPv6 traffic class
  uint8_t hop_limit = 64;     // IPv4 TTL or IPv6 hop limit
  uint32_t flow_label = 0;    // IPv6 only, 20 bits

  bool ipv4() const;
};

// ::ffff:a.b.c.d. (Inline: every receive completion asks, core/grh.h.)
inline bool is_v4_mapped(const in6_addr& a) {
  constexpr uint8_t kPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF};
  return std::memcmp(a.s6_addr, kPrefix, sizeof kPrefix) == 0;
}
// A group address: IPv4 224.0.0.0/4 (mapped) or IPv6 ff00::/8.
bool is_multicast(const in6_addr& a);
// ::ffff:a.b.c.d from an IPv4 address in network byte order.
in6_addr v4_mapped(uint32_t ipv4_be);

// The frame carrying `pkt`'s headers and `len` bytes of `payload`. PadCnt
// in the BTH is set from `len` (pkt.bth.pad and pkt.payload are ignored),
// the pad is zeros, the ICRC is appended. No Ethernet minimum-size padding
// (the NIC adds it). Empty if the opcode is unknown or carries no payload
// but `len` > 0, if the address families differ, or if the packet would
// not fit in an IP datagram.
std::vector<uint8_t> build_frame(const FrameAddrs& addrs, const RocePacket& pkt, const uint8_t* payload,
                                 size_t len);

enum class FrameError : uint8_t {
  kNone,
  kNotRoce,    // not IPv4/IPv6 UDP to the RoCE port: someone else's frame
  kMalformed,  // addressed to us but inconsistent: lengths, IP checksum, headers
  kBadIcrc,    // well-formed but corrupted in flight
};
const char* to_string(FrameError e);

struct ParsedFrame {
  FrameError error = FrameError::kNone;
  FrameAddrs addrs;
  RocePacket packet;  // payload points into the parsed frame
};

// The reverse of build_frame. Accepts trailing bytes after the IP datagram
// (Ethernet minimum-size padding), a zero UDP checksum (rxe sends those on
// IPv4), and otherwise checks the IPv4 header checksum, a non-zero UDP
// checksum and the ICRC. False with out->error set on failure.
bool parse_frame(const uint8_t* frame, size_t len, ParsedFrame* out, uint16_t udp_port = kRoceUdpPort);

}  // namespace sv::net
