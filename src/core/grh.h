// The 40-byte Global Route Header that a UD receive buffer starts with. On
// RoCEv2 it holds the packet's IP header: for IPv4 (IPv4-mapped GIDs) 20
// zero bytes and then the IPv4 header, for IPv6 the IPv6 header, as Linux
// rxe and mlx5 write it, so ibv_init_ah_from_wc can read it back.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "net/roce_frame.h"

namespace sv {

inline constexpr uint32_t kGrhBytes = 40;
// What RoCEv2 puts between IP and payload: UDP 8 + BTH 12 + DETH 8 + ICRC 4.
inline constexpr uint32_t kRoceUdOverhead = 8 + 12 + 8 + 4;

void build_grh(uint8_t out[kGrhBytes], const ibv_gid& sgid, const ibv_gid& dgid, uint8_t traffic_class,
               uint8_t hop_limit, uint32_t flow_label, uint32_t payload_len);

struct ParsedGrh {
  ibv_gid sgid, dgid;
  uint8_t traffic_class, hop_limit;
  uint32_t flow_label;
};
// false (errno EPROTONOSUPPORT) when the header is neither IPv4 nor IPv6.
bool parse_grh(const uint8_t in[kGrhBytes], ParsedGrh* out);

// What a receive completion's `sl` holds on a RoCE port. A RoCE packet
// carries no service level (priority travels in the VLAN tag or DSCP), and
// mlx5 reports the packet's L3 header type in that field instead: 2 for
// IPv4, 1 for IPv6 (0 would be RoCEv1's GRH). Middleware reads it: UCX's UD
// transport takes the receiver's address from the last 4 bytes of the GRH
// when `(sl & 7) == 2` and from the last 16 otherwise, and drops every
// datagram whose address is not one of its GIDs.
inline constexpr uint8_t kRoceL3Ipv6 = 1;
inline constexpr uint8_t kRoceL3Ipv4 = 2;
// (Inline: it is on every receive completion.)
// (A GID is an IPv6 address: net::is_v4_mapped, inline, decides, as
// gid_is_ipv4_mapped does out of line.)
inline uint8_t roce_l3_header_type(const ibv_gid& sgid, const ibv_gid& dgid) {
  const auto* s = reinterpret_cast<const in6_addr*>(sgid.raw);
  const auto* d = reinterpret_cast<const in6_addr*>(dgid.raw);
  return net::is_v4_mapped(*s) && net::is_v4_mapped(*d) ? kRoceL3Ipv4 : kRoceL3Ipv6;
}

}  // namespace sv
