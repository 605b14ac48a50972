// rdma_create_ep / rdma_destroy_ep: the one-call endpoint helpers built on
// the rest of the API, as rdma_create_ep(3) describes them.
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>

#include <cerrno>
#include <cstring>

#include "c_boundary.h"
#include "cm_state.h"

using namespace sv::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_create_ep(struct rdma_cm_id** out,
                                                      struct rdma_addrinfo* res,
                                                      struct ibv_pd* pd,
                                                      struct ibv_qp_init_attr* qp_init_attr) {
  if (!out || !res) return fail(EINVAL);
  if (res->ai_family != AF_INET && res->ai_family != AF_INET6) return fail(EAFNOSUPPORT);
  return guarded(-1, [&] {
    rdma_cm_id* cm_id = nullptr;
    Id* id = nullptr;
    {
      CmLock lock(cm_mutex());
      id = id_create(nullptr, nullptr, static_cast<rdma_port_space>(res->ai_port_space),
                     static_cast<ibv_qp_type>(res->ai_qp_type), true);
      if (!id) return -1;
      cm_id = &id->pub;
    }
    auto undo = [&] {
      int err = errno;
      rdma_destroy_id(cm_id);
      errno = err;
      return -1;
    };
    if (res->ai_flags & RAI_PASSIVE) {
      if (rdma_bind_addr(cm_id, res->ai_src_addr) != 0) return undo();
      if (qp_init_attr) {
        // The QP of each request is created by rdma_get_request.
        id->listen_qp_attr = new ibv_qp_init_attr(*qp_init_attr);
        id->listen_qp_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
      }
      *out = cm_id;
      return 0;
    }
    if (rdma_resolve_addr(cm_id, res->ai_src_addr, res->ai_dst_addr, 2000) != 0) return undo();
    if (rdma_resolve_route(cm_id, 2000) != 0) return undo();
    if (qp_init_attr) {
      qp_init_attr->qp_type = static_cast<ibv_qp_type>(res->ai_qp_type);
      if (rdma_create_qp(cm_id, pd, qp_init_attr) != 0) return undo();
    }
    if (res->ai_connect_len) {
      auto* data = static_cast<const uint8_t*>(res->ai_connect);
      id->connect_data.assign(data, data + res->ai_connect_len);
    }
    *out = cm_id;
    return 0;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT void rdma_destroy_ep(struct rdma_cm_id* cm_id) {
  if (!cm_id) return;
  const int saved_errno = errno;
  if (cm_id->qp) rdma_destroy_qp(cm_id);
  if (cm_id->srq) rdma_destroy_srq(cm_id);
  rdma_destroy_id(cm_id);
  errno = saved_errno;
}
