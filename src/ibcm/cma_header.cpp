#include "cma_header.h"

#include <algorithm>
#include <cstring>

#include "bit_field.h"

namespace sv::ibcm {
namespace {

constexpr BitField kVersion{0, 0, 8};
constexpr BitField kIpVersion{1, 0, 4};
constexpr BitField kPort{2, 0, 16};
constexpr size_t kSrcAddr = 4;
constexpr size_t kDstAddr = 20;
constexpr size_t kIpv4InAddr = 12;  // where an IPv4 address sits in its 16 bytes

}  // namespace

std::optional<IpService> parse_ip_service_id(uint64_t service_id) {
  if ((service_id & kIpServiceIdMask) != kIpServiceIdPrefix) return std::nullopt;
  auto ps = static_cast<PortSpace>(service_id >> 16);
  if (ps != PortSpace::kTcp && ps != PortSpace::kUdp && ps != PortSpace::kIb) return std::nullopt;
  return IpService{ps, static_cast<uint16_t>(service_id)};
}

std::optional<CmaHeader> cma_header_from(const sockaddr* src, const sockaddr* dst) {
  if (!src || !dst || src->sa_family != dst->sa_family) return std::nullopt;
  CmaHeader h;
  if (src->sa_family == AF_INET) {
    sockaddr_in s, d;
    std::memcpy(&s, src, sizeof s);
    std::memcpy(&d, dst, sizeof d);
    h.ip_version = 4;
    h.src_port = ntohs(s.sin_port);
    std::memcpy(h.src_addr.data() + kIpv4InAddr, &s.sin_addr, 4);
    std::memcpy(h.dst_addr.data() + kIpv4InAddr, &d.sin_addr, 4);
    return h;
  }
  if (src->sa_family == AF_INET6) {
    sockaddr_in6 s, d;
    std::memcpy(&s, src, sizeof s);
    std::memcpy(&d, dst, sizeof d);
    h.ip_version = 6;
    h.src_port = ntohs(s.sin6_port);
    std::memcpy(h.src_addr.data(), &s.sin6_addr, 16);
    std::memcpy(h.dst_addr.data(), &d.sin6_addr, 16);
    return h;
  }
  return std::nullopt;
}

void to_sockaddrs(const CmaHeader& h, uint16_t dst_port, sockaddr_storage& src,
                  sockaddr_storage& dst) {
  src = {};
  dst = {};
  auto fill = [&h](sockaddr_storage& ss, const std::array<uint8_t, 16>& addr, uint16_t port) {
    if (h.ip_version == 4) {
      sockaddr_in sin{};
      sin.sin_family = AF_INET;
      sin.sin_port = htons(port);
      std::memcpy(&sin.sin_addr, addr.data() + kIpv4InAddr, 4);
      std::memcpy(&ss, &sin, sizeof sin);
    } else {
      sockaddr_in6 sin6{};
      sin6.sin6_family = AF_INET6;
      sin6.sin6_port = htons(port);
      std::memcpy(&sin6.sin6_addr, addr.data(), 16);
      std::memcpy(&ss, &sin6, sizeof sin6);
    }
  };
  fill(src, h.src_addr, h.src_port);
  fill(dst, h.dst_addr, dst_port);
}

void encode_cma_header(const CmaHeader& h, std::span<uint8_t, kCmaHeaderSize> out) {
  std::fill(out.begin(), out.end(), uint8_t{0});
  put_bits(out, kVersion, kCmaVersion);
  put_bits(out, kIpVersion, h.ip_version);
  put_bits(out, kPort, h.src_port);
  if (h.ip_version == 4) {
    // Only the last 4 bytes of each address: the rest stays 0 as in cma.c.
    std::copy_n(h.src_addr.begin() + kIpv4InAddr, 4, out.begin() + kSrcAddr + kIpv4InAddr);
    std::copy_n(h.dst_addr.begin() + kIpv4InAddr, 4, out.begin() + kDstAddr + kIpv4InAddr);
  } else {
    std::copy(h.src_addr.begin(), h.src_addr.end(), out.begin() + kSrcAddr);
    std::copy(h.dst_addr.begin(), h.dst_addr.end(), out.begin() + kDstAddr);
  }
}

std::optional<CmaHeader> decode_cma_header(std::span<const uint8_t> in) {
  if (in.size() < kCmaHeaderSize) return std::nullopt;
  if (get_bits(in, kVersion) != kCmaVersion) return std::nullopt;
  CmaHeader h;
  h.ip_version = static_cast<uint8_t>(get_bits(in, kIpVersion));
  if (h.ip_version != 4 && h.ip_version != 6) return std::nullopt;
  h.src_port = static_cast<uint16_t>(get_bits(in, kPort));
  std::copy_n(in.begin() + kSrcAddr, 16, h.src_addr.begin());
  std::copy_n(in.begin() + kDstAddr, 16, h.dst_addr.begin());
  if (h.ip_version == 4) {
    // Like cma.c, look only at the address itself, not the padding.
    std::fill_n(h.src_addr.begin(), kIpv4InAddr, uint8_t{0});
    std::fill_n(h.dst_addr.begin(), kIpv4InAddr, uint8_t{0});
  }
  return h;
}

}  // namespace sv::ibcm
