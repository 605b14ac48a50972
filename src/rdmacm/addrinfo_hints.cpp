// Translation between rdma_addrinfo hints and getaddrinfo (see
// addrinfo_hints.h).
#include "addrinfo_hints.h"

#include <infiniband/ib.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace sv::rdmacm {

namespace {

// 0 lets the resolver answer with any socket type.
int socktype_for(int qp_type) noexcept {
  switch (qp_type) {
    case IBV_QPT_RC:
    case IBV_QPT_UC:
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV:
      return SOCK_STREAM;
    case IBV_QPT_UD:
      return SOCK_DGRAM;
    default:
      return 0;
  }
}

// 0 lets the resolver answer with any protocol.
int protocol_for(int port_space, int socktype) noexcept {
  switch (port_space) {
    case RDMA_PS_TCP:
      return IPPROTO_TCP;
    case RDMA_PS_UDP:
    case RDMA_PS_IPOIB:
      return IPPROTO_UDP;
    case RDMA_PS_IB:
      // The IB port space carries both kinds of QP: the QP type decides.
      if (socktype == SOCK_STREAM) return IPPROTO_TCP;
      if (socktype == SOCK_DGRAM) return IPPROTO_UDP;
      return 0;
    default:
      return 0;
  }
}

}  // namespace

bool wants_ib_address(const rdma_addrinfo& hints) noexcept {
  return (hints.ai_flags & RAI_FAMILY) && (hints.ai_flags & RAI_NUMERICHOST) &&
         hints.ai_family == AF_IB;
}

addrinfo system_hints(const rdma_addrinfo& hints) noexcept {
  addrinfo ai{};
  if (hints.ai_flags & RAI_PASSIVE) ai.ai_flags |= AI_PASSIVE;
  if (hints.ai_flags & RAI_NUMERICHOST) ai.ai_flags |= AI_NUMERICHOST;
  // An AF_IB address is a GID written as an IPv6 address, so only IPv6
  // answers can become one. (rdma-core asks for AF_UNSPEC here and would
  // read an IPv4 answer as if it were IPv6.)
  if (wants_ib_address(hints)) {
    ai.ai_family = AF_INET6;
  } else if (hints.ai_family != AF_IB) {
    ai.ai_family = hints.ai_family;
  }
  ai.ai_socktype = socktype_for(hints.ai_qp_type);
  ai.ai_protocol = protocol_for(hints.ai_port_space, ai.ai_socktype);
  return ai;
}

int qp_type_for(const rdma_addrinfo& hints, const addrinfo& answer) noexcept {
  if (hints.ai_qp_type) return hints.ai_qp_type;
  switch (answer.ai_socktype) {
    case SOCK_STREAM:
      return IBV_QPT_RC;
    case SOCK_DGRAM:
      return IBV_QPT_UD;
    default:
      return 0;
  }
}

int port_space_for(const rdma_addrinfo& hints, const addrinfo& answer) noexcept {
  if (hints.ai_port_space) return hints.ai_port_space;
  switch (answer.ai_protocol) {
    case IPPROTO_TCP:
      return RDMA_PS_TCP;
    case IPPROTO_UDP:
      return RDMA_PS_UDP;
    default:
      return 0;
  }
}

}  // namespace sv::rdmacm
