// What rdma_cm adds to the IB CM so that an IP connection can be set up
// with it (IBTA vol 1 annex A11, "RDMA IP CM Service"; Linux
// drivers/infiniband/core/cma.c):
//
//  - the service ID names the destination port and the port space:
//    0x0000000001000000 | port space << 16 | port (cma_get_service_id,
//    RDMA_IB_IP_PS_*);
//  - the REQ and SIDR REQ private data start with a 36-byte header carrying
//    the source port and both IP addresses (struct cma_hdr); the user's
//    private data follows it.
//
//   byte 0 cma_version (0x00) | byte 1 IP version in bits 7:4 (4 or 6)
//   bytes 2-3 source port | bytes 4-19 source IP | bytes 20-35 destination IP
//   (an IPv4 address is in the last 4 of its 16 bytes, the first 12 are 0)
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace sv::ibcm {

inline constexpr size_t kCmaHeaderSize = 36;
inline constexpr uint8_t kCmaVersion = 0x00;

// rdma_cm port spaces (enum rdma_ucm_port_space).
enum class PortSpace : uint16_t { kIpoib = 0x0002, kTcp = 0x0106, kUdp = 0x0111, kIb = 0x013f };

inline constexpr uint64_t kIpServiceIdPrefix = 0x0000000001000000ull;  // IB_CMA_SERVICE_ID
inline constexpr uint64_t kIpServiceIdMask = 0xffffffffff000000ull;    // IB_CMA_SERVICE_ID_MASK

constexpr uint64_t ip_service_id(PortSpace ps, uint16_t port) {
  return (uint64_t{static_cast<uint16_t>(ps)} << 16) | port;
}

struct IpService {
  PortSpace port_space;
  uint16_t port;
  bool operator==(const IpService&) const = default;
};

// The port space and port of an rdma_cm service ID (TCP, UDP or IB port
// space); nullopt for any other service ID.
std::optional<IpService> parse_ip_service_id(uint64_t service_id);

struct CmaHeader {
  uint8_t ip_version = 4;  // 4 or 6
  uint16_t src_port = 0;   // host order
  std::array<uint8_t, 16> src_addr{};
  std::array<uint8_t, 16> dst_addr{};

  bool operator==(const CmaHeader&) const = default;
};

// Both addresses must be of one family, AF_INET or AF_INET6; the source
// port comes from `src` (the destination port travels in the service ID).
std::optional<CmaHeader> cma_header_from(const sockaddr* src, const sockaddr* dst);

// The two socket addresses the header describes; the destination port is
// the caller's (from the service ID).
void to_sockaddrs(const CmaHeader& h, uint16_t dst_port, sockaddr_storage& src,
                  sockaddr_storage& dst);

void encode_cma_header(const CmaHeader& h, std::span<uint8_t, kCmaHeaderSize> out);
// nullopt when the buffer is short, cma_version is not 0 or the IP version
// is neither 4 nor 6.
std::optional<CmaHeader> decode_cma_header(std::span<const uint8_t> in);

}  // namespace sv::ibcm
