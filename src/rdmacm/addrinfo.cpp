// rdma_getaddrinfo / rdma_freeaddrinfo: getaddrinfo for RDMA endpoints.
//
// Behaviour is rdma-core 44's librdmacm:
// - Names and services go through the system getaddrinfo; its FIRST answer
//   becomes the one-node result (ai_next is always NULL), typed by the hints'
//   QP type and port space or, failing those, by the answer's socket type
//   and protocol.
// - RAI_PASSIVE results carry the source address (the wildcard when node is
//   NULL); active results carry the destination. For an active result
//   rdma-core then asks ibacm for a source address and route, and without
//   ibacm (always the case here) leaves them unset: the source is only
//   hints->ai_src_addr, ai_route and ai_connect stay NULL, and RAI_NOROUTE,
//   which only steers ibacm, changes nothing.
// - The canonical names are copied from the resolver's answer, which has
//   none: rdma-core never asks for AI_CANONNAME.
// - Failure is -1 with errno. A resolver failure leaves its (negative)
//   EAI_* code in errno, as rdma-core does, so callers that print
//   gai_strerror(errno) keep working.
// Where rdma-core would crash (res NULL, a hint address with a length but
// no pointer) we fail with EINVAL instead. Unlike rdma-core we do not first
// look for verbs devices (ENODEV when there are none): softverbs always has
// its device, and resolving a name should not start it.
//
// rdma_freeaddrinfo follows rdma-core exactly: every pointer member and the
// node itself are released with free(), so the result is built from
// malloc'ed memory only.
#include <netdb.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "addrinfo_hints.h"
#include "c_boundary.h"
#include "ib_sockaddr.h"

using namespace sv::rdmacm;

namespace {

// Internal failures are the value rdma-core leaves in errno: a positive
// errno or a negative EAI_* code. 0 is success.
using Error = int;

struct SystemAddrinfoFree {
  void operator()(addrinfo* ai) const noexcept { freeaddrinfo(ai); }
};
using SystemAddrinfo = std::unique_ptr<addrinfo, SystemAddrinfoFree>;

struct RdmaAddrinfoFree {
  void operator()(rdma_addrinfo* rai) const noexcept { rdma_freeaddrinfo(rai); }
};
using RdmaAddrinfo = std::unique_ptr<rdma_addrinfo, RdmaAddrinfoFree>;

// What a NULL hints argument means once node or service is given.
constexpr rdma_addrinfo kNoHints{};

Error copy_address(sockaddr** dst, socklen_t* dst_len, const sockaddr* src, socklen_t len) {
  if (!src) return EINVAL;
  void* copy = std::malloc(len);
  if (!copy) return ENOMEM;
  std::memcpy(copy, src, len);
  *dst = static_cast<sockaddr*>(copy);
  *dst_len = len;
  return 0;
}

Error copy_ib_address(sockaddr** dst, socklen_t* dst_len, int port_space, const addrinfo& answer) {
  // The resolver was asked for IPv6 only; anything else is not a GID.
  if (answer.ai_family != AF_INET6 || answer.ai_addrlen < sizeof(sockaddr_in6)) return EAI_FAMILY;
  sockaddr_in6 in6;
  std::memcpy(&in6, answer.ai_addr, sizeof(in6));
  const sockaddr_ib ib = ib_sockaddr_from_in6(port_space, in6);
  return copy_address(dst, dst_len, reinterpret_cast<const sockaddr*>(&ib), sizeof(ib));
}

Error copy_name(char** dst, const char* name) {
  if (!name) return 0;
  *dst = strdup(name);
  return *dst ? 0 : ENOMEM;
}

// Fills `rai` from the resolver's answer: the source side for a passive
// request, the destination side for an active one.
Error fill_from_answer(rdma_addrinfo& rai, const rdma_addrinfo& hints, const addrinfo& answer) {
  rai.ai_qp_type = qp_type_for(hints, answer);
  rai.ai_port_space = port_space_for(hints, answer);

  const bool passive = hints.ai_flags & RAI_PASSIVE;
  // rdma-core keeps no other flag in a resolved result.
  rai.ai_flags = passive ? RAI_PASSIVE : 0;
  sockaddr** addr = passive ? &rai.ai_src_addr : &rai.ai_dst_addr;
  socklen_t* addr_len = passive ? &rai.ai_src_len : &rai.ai_dst_len;
  char** canonname = passive ? &rai.ai_src_canonname : &rai.ai_dst_canonname;

  if (Error err = copy_name(canonname, answer.ai_canonname)) return err;
  if (wants_ib_address(hints)) {
    rai.ai_family = AF_IB;
    return copy_ib_address(addr, addr_len, rai.ai_port_space, answer);
  }
  rai.ai_family = answer.ai_family;
  return copy_address(addr, addr_len, answer.ai_addr, answer.ai_addrlen);
}

Error resolve(const char* node, const char* service, const rdma_addrinfo* hints,
              rdma_addrinfo& rai) {
  addrinfo* answers = nullptr;
  Error err = 0;
  if (hints) {
    const addrinfo request = system_hints(*hints);
    err = getaddrinfo(node, service, &request, &answers);
  } else {
    // No hints means the resolver's own defaults, as in rdma-core.
    err = getaddrinfo(node, service, nullptr, &answers);
  }
  if (err) return err;
  const SystemAddrinfo owned{answers};
  return fill_from_answer(rai, hints ? *hints : kNoHints, *owned);
}

// With neither node nor service, the hints themselves are the answer.
Error copy_hints(rdma_addrinfo& rai, const rdma_addrinfo& hints) {
  rai.ai_flags = hints.ai_flags;
  rai.ai_family = hints.ai_family;
  rai.ai_qp_type = hints.ai_qp_type;
  rai.ai_port_space = hints.ai_port_space;
  if (!hints.ai_dst_len) return 0;
  return copy_address(&rai.ai_dst_addr, &rai.ai_dst_len, hints.ai_dst_addr, hints.ai_dst_len);
}

Error get_addrinfo(const char* node, const char* service, const rdma_addrinfo* hints,
                   rdma_addrinfo** res) {
  if (!res || (!node && !service && !hints)) return EINVAL;

  RdmaAddrinfo rai{static_cast<rdma_addrinfo*>(std::calloc(1, sizeof(rdma_addrinfo)))};
  if (!rai) return ENOMEM;

  Error err = (node || service) ? resolve(node, service, hints, *rai) : copy_hints(*rai, *hints);
  if (err) return err;

  // A source the resolution did not give (any active result) comes from
  // the hints; rdma-core would then ask ibacm, which we do not have.
  const rdma_addrinfo& given = hints ? *hints : kNoHints;
  if (!rai->ai_src_len && given.ai_src_len) {
    err = copy_address(&rai->ai_src_addr, &rai->ai_src_len, given.ai_src_addr, given.ai_src_len);
    if (err) return err;
  }

  *res = rai.release();
  return 0;
}

}  // namespace

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_getaddrinfo(const char* node, const char* service,
                                                        const struct rdma_addrinfo* hints,
                                                        struct rdma_addrinfo** res) {
  return guarded(-1, [&]() -> int {
    const Error err = get_addrinfo(node, service, hints, res);
    return err ? fail(err) : 0;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo* res) {
  while (res) {
    rdma_addrinfo* node = res;
    res = res->ai_next;
    std::free(node->ai_connect);
    std::free(node->ai_route);
    std::free(node->ai_src_canonname);
    std::free(node->ai_dst_canonname);
    std::free(node->ai_src_addr);
    std::free(node->ai_dst_addr);
    std::free(node);
  }
}
