// Lifetime and options of an rdma_cm_id. Not implemented yet: every call
// fails with EOPNOTSUPP (void calls do nothing).
#include <rdma/rdma_cma.h>

#include "c_boundary.hpp"

using namespace softverbs::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_create_id(struct rdma_event_channel* channel,
                                                      struct rdma_cm_id** id, void* context,
                                                      enum rdma_port_space ps) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_destroy_id(struct rdma_cm_id* id) { return fail(); }

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_create_ep(struct rdma_cm_id** id,
                                                      struct rdma_addrinfo* res,
                                                      struct ibv_pd* pd,
                                                      struct ibv_qp_init_attr* qp_init_attr) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT void rdma_destroy_ep(struct rdma_cm_id* id) {}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_migrate_id(struct rdma_cm_id* id,
                                                       struct rdma_event_channel* channel) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_set_option(struct rdma_cm_id* id, int level,
                                                       int optname, void* optval,
                                                       size_t optlen) {
  return fail();
}

// rdma-core returns port 0 for an id it cannot describe.
extern "C" SOFTVERBS_RDMACM_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id* id) {
  errno = kNotImplemented;
  return 0;
}

extern "C" SOFTVERBS_RDMACM_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id* id) {
  errno = kNotImplemented;
  return 0;
}
