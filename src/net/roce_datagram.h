// RoCEv2 packets as a UDP socket sends and receives them: BTH, extension
// headers, payload, pad and ICRC, without the Ethernet, IP and UDP headers
// (the kernel writes those). The ICRC still covers the IP and UDP headers,
// so both directions rebuild them in a headroom before the packet
// (docs/ARCHITECTURE.md, "The ICRC through UDP sockets").
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>

#include "roce_header.h"

namespace sv::net {

// Room for an IPv6 and a UDP header, in front of every datagram buffer.
inline constexpr size_t kDatagramHeadroom = 48;
// The most a datagram adds to its payload: the largest headers, pad, ICRC.
inline constexpr size_t kDatagramOverhead = 64 + 3 + 4;

struct DatagramAddrs {
  in6_addr src_ip{}, dst_ip{};  // both v4-mapped (IPv4) or both not
  uint16_t src_port = 0, dst_port = 0;
};

// Writes `pkt` with `len` bytes of `payload` at buf + kDatagramHeadroom and
// returns its length (ICRC included), or 0 for an unknown opcode. `buf`
// holds kDatagramHeadroom + kDatagramOverhead + len bytes. The ICRC is
// computed for IPv4 with IP ID 0: what Linux sends on an unconnected socket
// with DF set (IP_PMTUDISC_DO). Without `icrc`, the ICRC's 4 bytes are
// left as they are: for a datagram that goes through memory, not a wire
// (transport/roce_peer_channels.h), whose receiver does not check it.
size_t build_datagram(const DatagramAddrs& a, const RocePacket& pkt, const uint8_t* payload, size_t len,
                      uint8_t* buf, bool icrc = true);

// Writes the ICRC into the last 4 bytes of the `len`-byte datagram at
// buf + kDatagramHeadroom, whatever the bytes before it (as build_datagram
// does for a packet it encoded): test tools seal malformed packets with it,
// so that they pass the ICRC check and reach the decoders behind it. No-op
// when `len` cannot hold a BTH and an ICRC.
void put_datagram_icrc(const DatagramAddrs& a, uint8_t* buf, size_t len);

// Rewrites the ICRC of the IPv4 datagram at `at` (`len` bytes, ICRC
// included, as build_datagram made it for IP ID 0) for IP ID `id`: UDP
// segmentation offload (GSO) gives the k-th segment of a send ID k, and a
// receiver that checks the ICRC exactly (rxe) sees that ID.
void set_icrc_ip_id(uint8_t* at, size_t len, uint16_t id);

// Whether the ICRC of the `len`-byte datagram at buf + kDatagramHeadroom
// (ICRC included) is right; writes nothing (the headroom may hold the end
// of the packet before, in a GRO buffer). On
// IPv4 the sender's IP ID is unknown to a UDP socket: ID 0 is tried first,
// then any ID (the CRC is linear in it: a corrupted packet still fails, with
// probability 1 - 2^-16).
bool datagram_icrc_ok(const DatagramAddrs& a, const uint8_t* buf, size_t len);

}  // namespace sv::net
