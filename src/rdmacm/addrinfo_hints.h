// How rdma_getaddrinfo's hints map onto the system getaddrinfo and how its
// answer maps back: QP types are socket types (RC-like = stream, UD =
// datagram) and port spaces are protocols (TCP, UDP), as in rdma-core.
#pragma once

#include <netdb.h>
#include <rdma/rdma_cma.h>

namespace sv::rdmacm {

// rdma-core answers with an AF_IB address only when all three of
// RAI_FAMILY, RAI_NUMERICHOST and ai_family == AF_IB are given; AF_IB alone
// resolves as AF_UNSPEC.
[[nodiscard]] bool wants_ib_address(const rdma_addrinfo& hints) noexcept;

// The getaddrinfo hints that ask for what `hints` describes.
[[nodiscard]] addrinfo system_hints(const rdma_addrinfo& hints) noexcept;

// The result's QP type and port space: the hints' own when set, otherwise
// what the resolver's answer implies (0 when it implies nothing).
[[nodiscard]] int qp_type_for(const rdma_addrinfo& hints, const addrinfo& answer) noexcept;
[[nodiscard]] int port_space_for(const rdma_addrinfo& hints, const addrinfo& answer) noexcept;

}  // namespace sv::rdmacm
