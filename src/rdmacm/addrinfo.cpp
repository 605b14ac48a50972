// rdma_getaddrinfo / rdma_freeaddrinfo.
//
// rdma_freeaddrinfo follows rdma-core exactly: every pointer member and the
// node itself are released with free(), so rdma_getaddrinfo must build its
// result with malloc'ed members when it is implemented.
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdlib>

#include "c_boundary.hpp"

using namespace softverbs::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_getaddrinfo(const char* node, const char* service,
                                                        const struct rdma_addrinfo* hints,
                                                        struct rdma_addrinfo** res) {
  return fail();
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
