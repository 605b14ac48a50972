// Ethernet frames as a NIC's raw-packet engine sees them: parsing (VLAN,
// IPv4/IPv6, TCP/UDP), the checksum offloads, TCP segmentation (TSO), the
// Ethernet FCS, and the Toeplitz hash of receive-side scaling. Pure
// functions over bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace sv::packet {

// Where the layers of a frame start, and what they say (zero/false when
// absent). Fields are in host order unless their name says _be.
struct Parsed {
  const uint8_t* frame = nullptr;
  size_t len = 0;
  uint8_t dst_mac[6]{}, src_mac[6]{};
  uint16_t ether_type = 0;  // after any VLAN tag
  bool vlan = false;
  uint16_t vlan_tci = 0;
  size_t l3 = 0;  // offset of the IP header, 0 if none
  int ip_version = 0;
  uint32_t src_ip4_be = 0, dst_ip4_be = 0;
  uint8_t src_ip6[16]{}, dst_ip6[16]{};
  uint8_t ip_proto = 0, tos = 0, ttl = 0;
  uint32_t flow_label = 0;
  size_t l4 = 0;  // offset of the TCP/UDP header, 0 if none
  uint16_t src_port = 0, dst_port = 0;
};

Parsed parse(const uint8_t* frame, size_t len);

// The one's-complement checksum of RFC 1071 over `len` bytes, folded.
uint16_t csum_fold(uint32_t sum);
uint32_t csum_add(uint32_t sum, const uint8_t* data, size_t len);

// IBV_SEND_IP_CSUM: fills the IPv4 header checksum and the TCP/UDP
// checksum of an IPv4 or IPv6 frame in place (nothing for other frames).
void fill_checksums(uint8_t* frame, size_t len);
// Whether a received frame's IPv4 header and TCP/UDP checksums are right
// (IBV_WC_IP_CSUM_OK). False for frames that are not IPv4/IPv6 TCP/UDP.
bool checksums_ok(const uint8_t* frame, size_t len);

// IBV_WR_TSO: the frames a NIC sends for header `hdr` (Ethernet, IP, TCP)
// and `payload`, at most `mss` payload bytes each: lengths, IPv4 ids, TCP
// sequence numbers and flags (FIN/PSH only on the last) fixed up, and
// checksums filled. Empty if the header is not Ethernet/IP/TCP.
std::vector<std::vector<uint8_t>> segment_tcp(const uint8_t* hdr, size_t hdr_len, const uint8_t* payload,
                                              size_t payload_len, uint16_t mss);

// The Ethernet frame check sequence (CRC-32, as appended on the wire).
uint32_t fcs(const uint8_t* frame, size_t len);

// Toeplitz hash of `data` under `key` (receive-side scaling).
uint32_t toeplitz(const uint8_t* key, size_t key_len, const uint8_t* data, size_t len);

}  // namespace sv::packet
