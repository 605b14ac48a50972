// Building AF_IB addresses from IPv6 ones (see ib_sockaddr.h).
#include "ib_sockaddr.h"

#include <endian.h>

#include <cstdint>
#include <cstring>

namespace sv::rdmacm {

namespace {

// Every partition, full membership: what an address without a P_Key means.
constexpr uint16_t kDefaultPkey = 0xffff;

}  // namespace

sockaddr_ib ib_sockaddr_from_in6(int port_space, const sockaddr_in6& in6) noexcept {
  sockaddr_ib ib{};
  ib.sib_family = AF_IB;
  ib.sib_pkey = htobe16(kDefaultPkey);
  ib.sib_flowinfo = in6.sin6_flowinfo;
  static_assert(sizeof(ib.sib_addr) == sizeof(in6.sin6_addr));
  std::memcpy(&ib.sib_addr, &in6.sin6_addr, sizeof(ib.sib_addr));
  ib.sib_scope_id = in6.sin6_scope_id;

  // The IP-compatible service id: port space in bits 16..31, port below.
  // A zero part is a wildcard, so the mask leaves it out (rdma-core's rule).
  const uint16_t port = be16toh(in6.sin6_port);
  const uint64_t space = static_cast<uint32_t>(port_space);
  ib.sib_sid = htobe64((space << 16) + port);
  uint64_t mask = 0;
  if (space != 0) mask |= RDMA_IB_IP_PS_MASK;
  if (port != 0) mask |= RDMA_IB_IP_PORT_MASK;
  ib.sib_sid_mask = htobe64(mask);
  return ib;
}

}  // namespace sv::rdmacm
