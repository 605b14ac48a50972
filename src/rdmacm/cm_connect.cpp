// Address/route resolution and the connection handshake (active and passive
// side, ECE, QP attribute hand-off). Not implemented yet: every call fails
// with EOPNOTSUPP.
#include <rdma/rdma_cma.h>

#include "c_boundary.hpp"

using namespace softverbs::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_bind_addr(struct rdma_cm_id* id,
                                                      struct sockaddr* addr) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_resolve_addr(struct rdma_cm_id* id,
                                                         struct sockaddr* src_addr,
                                                         struct sockaddr* dst_addr,
                                                         int timeout_ms) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_resolve_route(struct rdma_cm_id* id, int timeout_ms) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_listen(struct rdma_cm_id* id, int backlog) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_get_request(struct rdma_cm_id* listen,
                                                        struct rdma_cm_id** id) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_connect(struct rdma_cm_id* id,
                                                    struct rdma_conn_param* conn_param) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_establish(struct rdma_cm_id* id) { return fail(); }

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_accept(struct rdma_cm_id* id,
                                                   struct rdma_conn_param* conn_param) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_reject(struct rdma_cm_id* id,
                                                   const void* private_data,
                                                   uint8_t private_data_len) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_reject_ece(struct rdma_cm_id* id,
                                                       const void* private_data,
                                                       uint8_t private_data_len) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_notify(struct rdma_cm_id* id,
                                                   enum ibv_event_type event) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_disconnect(struct rdma_cm_id* id) { return fail(); }

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_init_qp_attr(struct rdma_cm_id* id,
                                                         struct ibv_qp_attr* qp_attr,
                                                         int* qp_attr_mask) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_set_local_ece(struct rdma_cm_id* id,
                                                          struct ibv_ece* ece) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_get_remote_ece(struct rdma_cm_id* id,
                                                           struct ibv_ece* ece) {
  return fail();
}
