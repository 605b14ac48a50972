// AF_IB addresses (struct sockaddr_ib) for the RDMA CM.
//
// An IB GID is written in IPv6 notation, so librdmacm builds a sockaddr_ib
// from a resolved sockaddr_in6: the GID is the IPv6 address and the service
// id packs the RDMA port space above the port number.
#pragma once

#include <infiniband/ib.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>

namespace sv::rdmacm {

// The sockaddr_ib that rdma-core derives from `in6` for `port_space`:
// default P_Key, flow label and scope id carried over, and a service id
// mask that covers only the parts (port space, port) that are set.
[[nodiscard]] sockaddr_ib ib_sockaddr_from_in6(int port_space, const sockaddr_in6& in6) noexcept;

}  // namespace sv::rdmacm
