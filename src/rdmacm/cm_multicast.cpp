// Multicast groups on an rdma_cm_id. Not implemented yet: every call fails
// with EOPNOTSUPP.
#include <rdma/rdma_cma.h>

#include "c_boundary.hpp"

using namespace softverbs::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_join_multicast(struct rdma_cm_id* id,
                                                           struct sockaddr* addr, void* context) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_join_multicast_ex(
    struct rdma_cm_id* id, struct rdma_cm_join_mc_attr_ex* mc_join_attr, void* context) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_leave_multicast(struct rdma_cm_id* id,
                                                            struct sockaddr* addr) {
  return fail();
}
