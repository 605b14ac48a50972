// The RoCEv2 invariant CRC (IBTA vol 1 annex A17, RoCEv2; Linux rxe_icrc.c): a
// CRC-32 over the IP, UDP and transport headers with every field a router
// may rewrite masked to all ones, then the payload and pad. It protects the
// packet end to end where the Ethernet FCS is recomputed at every hop.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sv::net {

// `ip_packet` starts at the IPv4 or IPv6 header and runs `len` bytes to the
// end of the pad, without the 4 ICRC bytes. Masked to ones: IPv4 TOS, TTL
// and header checksum, or IPv6 traffic class, flow label and hop limit; the
// UDP checksum; BTH byte 4 (FECN, BECN, reserved). Those masked bytes are
// preceded by 8 bytes of ones that stand for the InfiniBand LRH RoCEv2 lacks.
//
// Returns the CRC as a number whose little-endian bytes are the 4 bytes on
// the wire (rxe stores the u32 in CPU order). Returns 0 when `ip_packet` is
// not IPv4/IPv6 or too short to hold IP, UDP and BTH headers.
uint32_t icrc(const uint8_t* ip_packet, size_t len);

// The same for headers and packet kept apart: `ip_udp` holds the IP and UDP
// headers (`ip_udp_len` bytes), `bth` the packet from its BTH to the end of
// the pad (`len` bytes). A receiver checks a packet this way without
// writing headers in front of it (where a GRO buffer holds the packet
// before).
uint32_t icrc(const uint8_t* ip_udp, size_t ip_udp_len, const uint8_t* bth, size_t len);

}  // namespace sv::net
