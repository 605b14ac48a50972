// QPs and SRQs created on an rdma_cm_id (rdma_cma.h and rdma_verbs.h). Not
// implemented yet: creation fails with EOPNOTSUPP, destruction does nothing.
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include "c_boundary.hpp"

using namespace softverbs::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_create_qp(struct rdma_cm_id* id, struct ibv_pd* pd,
                                                      struct ibv_qp_init_attr* qp_init_attr) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_create_qp_ex(struct rdma_cm_id* id,
                                                         struct ibv_qp_init_attr_ex* qp_init_attr) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT void rdma_destroy_qp(struct rdma_cm_id* id) {}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_create_srq(struct rdma_cm_id* id, struct ibv_pd* pd,
                                                       struct ibv_srq_init_attr* attr) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_create_srq_ex(struct rdma_cm_id* id,
                                                          struct ibv_srq_init_attr_ex* attr) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT void rdma_destroy_srq(struct rdma_cm_id* id) {}
