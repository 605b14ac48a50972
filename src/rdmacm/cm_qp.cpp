// rdma_create_qp(_ex) / rdma_destroy_qp exactly as their man pages say,
// rdma_create_srq(_ex) / rdma_destroy_srq, rdma_init_qp_attr, and the QP
// transitions the connection manager performs for the user.
#include "cm_faults.h"
#include "cm_qp.h"

#include "cm_device.h"

#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstring>

#include "c_boundary.h"
#include "cm_state.h"

namespace sv::rdmacm {
namespace {

bool is_ud(const Id* id) { return id->pub.qp_type == IBV_QPT_UD; }

void destroy_cm_cqs(rdma_cm_id* id) {
  // An XRC id's receive CQ serves its SRQ: it goes with the SRQ (as in librdmacm).
  if (id->qp_type == IBV_QPT_XRC_RECV && id->srq) return;
  if (id->recv_cq) {
    ibv_destroy_cq(id->recv_cq);
    if (id->send_cq && id->send_cq != id->recv_cq) ibv_destroy_cq(id->send_cq);
  } else if (id->send_cq) {
    ibv_destroy_cq(id->send_cq);
  }
  id->recv_cq = id->send_cq = nullptr;
  if (id->recv_cq_channel) {
    ibv_destroy_comp_channel(id->recv_cq_channel);
    if (id->send_cq_channel && id->send_cq_channel != id->recv_cq_channel)
      ibv_destroy_comp_channel(id->send_cq_channel);
  } else if (id->send_cq_channel) {
    ibv_destroy_comp_channel(id->send_cq_channel);
  }
  id->recv_cq_channel = id->send_cq_channel = nullptr;
}

// Creates the CQs the user did not provide, each with its own completion
// channel, and exposes them in the id (rdma_create_qp(3)).
int create_cm_cqs(rdma_cm_id* id, uint32_t send_size, uint32_t recv_size) {
  if (recv_size) {
    id->recv_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->recv_cq_channel) goto err;
    id->recv_cq = ibv_create_cq(id->verbs, static_cast<int>(recv_size), id, id->recv_cq_channel, 0);
    if (!id->recv_cq) goto err;
  }
  if (send_size) {
    id->send_cq_channel = ibv_create_comp_channel(id->verbs);
    if (!id->send_cq_channel) goto err;
    id->send_cq = ibv_create_cq(id->verbs, static_cast<int>(send_size), id, id->send_cq_channel, 0);
    if (!id->send_cq) goto err;
  }
  return 0;
err:
  int err = errno;
  destroy_cm_cqs(id);
  return fail(err ? err : ENOMEM);
}

int modify(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  int rc = ibv_modify_qp(qp, attr, mask);
  return rc ? fail(rc) : 0;
}

// A UD QP can send as soon as it exists: INIT with the port space's Q_Key,
// RTR, RTS.
int ready_ud_qp(Id* id, ibv_qp* qp) {
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;
  if (qp_attributes_for(id, &attr, &mask) || modify(qp, &attr, mask)) return -1;
  attr.qp_state = IBV_QPS_RTR;
  if (modify(qp, &attr, IBV_QP_STATE)) return -1;
  attr.qp_state = IBV_QPS_RTS;
  attr.sq_psn = 0;
  return modify(qp, &attr, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

// A connected QP goes to INIT, so receives can be posted at once; the rest
// of the way happens when the connection is made.
int ready_connected_qp(Id* id, ibv_qp* qp) {
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;
  if (qp_attributes_for(id, &attr, &mask)) return -1;
  return modify(qp, &attr, mask);
}

int create_qp(Id* id, ibv_qp_init_attr_ex* attr) {
  rdma_cm_id* cm = &id->pub;
  if (cm->qp || !cm->verbs) return fail(EINVAL);
  if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd) {
    attr->comp_mask |= IBV_QP_INIT_ATTR_PD;
    attr->pd = cm->pd;
  } else if (attr->pd->context != cm->verbs) {
    return fail(EINVAL);
  }
  if ((cm->recv_cq && attr->recv_cq && cm->recv_cq != attr->recv_cq) ||
      (cm->send_cq && attr->send_cq && cm->send_cq != attr->send_cq))
    return fail(EINVAL);
  // An XRC_RECV id without a domain gets the device's (as librdmacm does).
  if (cm->qp_type == IBV_QPT_XRC_RECV && (!(attr->comp_mask & IBV_QP_INIT_ATTR_XRCD) || !attr->xrcd)) {
    Device* dev = device_of(cm->verbs);
    attr->xrcd = dev ? default_xrcd(dev) : nullptr;
    if (!attr->xrcd) return -1;
    attr->comp_mask |= IBV_QP_INIT_ATTR_XRCD;
  }

  const bool had_send_cq = cm->send_cq != nullptr;
  const bool had_recv_cq = cm->recv_cq != nullptr;
  if (create_cm_cqs(cm, attr->send_cq || cm->send_cq ? 0 : attr->cap.max_send_wr,
                    attr->recv_cq || cm->recv_cq ? 0 : attr->cap.max_recv_wr) != 0)
    return -1;
  auto undo_cqs = [&] {
    int err = errno;
    if (!had_send_cq && !had_recv_cq) destroy_cm_cqs(cm);
    errno = err;
  };
  if (!attr->send_cq) attr->send_cq = cm->send_cq;
  if (!attr->recv_cq) attr->recv_cq = cm->recv_cq;
  if (cm->srq && !attr->srq) attr->srq = cm->srq;

  ibv_qp* qp = ibv_create_qp_ex(cm->verbs, attr);
  if (!qp) {
    undo_cqs();
    return -1;
  }
  ibv_ece ece{};
  if (ibv_query_ece(qp, &ece) == 0) id->local_ece = ece;
  if ((is_ud(id) ? ready_ud_qp(id, qp) : ready_connected_qp(id, qp)) != 0) {
    int err = errno;
    ibv_destroy_qp(qp);
    errno = err;
    undo_cqs();
    return -1;
  }
  cm->pd = qp->pd;
  cm->qp = qp;
  return 0;
}

}  // namespace

int qp_attributes_for(Id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask) {
  const ibv_qp_state target = qp_attr->qp_state;
  *qp_attr = {};
  qp_attr->qp_state = target;
  int mask = IBV_QP_STATE;
  switch (target) {
    case IBV_QPS_INIT:
      qp_attr->pkey_index = 0;
      qp_attr->port_num = id->pub.port_num ? id->pub.port_num : 1;
      mask |= IBV_QP_PKEY_INDEX | IBV_QP_PORT;
      if (is_ud(id)) {
        qp_attr->qkey = id->qkey;
        mask |= IBV_QP_QKEY;
      } else {
        // As the IB CM: remote writes once connected; reads and atomics
        // only when we grant responder resources.
        if (id->connected_info) {
          qp_attr->qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
          if (id->responder_resources)
            qp_attr->qp_access_flags |= IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
        }
        mask |= IBV_QP_ACCESS_FLAGS;
      }
      break;
    case IBV_QPS_RTR:
      if (is_ud(id)) break;
      if (!id->connected_info) return fail(EINVAL);
      qp_attr->ah_attr.is_global = 1;
      qp_attr->ah_attr.grh.dgid = id->remote_gid;
      qp_attr->ah_attr.grh.sgid_index = static_cast<uint8_t>(id->gid_index);
      qp_attr->ah_attr.grh.hop_limit = 64;
      qp_attr->ah_attr.grh.traffic_class = id->tos;
      qp_attr->ah_attr.sl = id->tos >> 5;
      qp_attr->ah_attr.port_num = id->pub.port_num ? id->pub.port_num : 1;
      qp_attr->path_mtu = static_cast<ibv_mtu>(id->path_mtu);
      qp_attr->dest_qp_num = id->remote_qpn;
      // A CM message's Starting PSN is what its sender will receive first
      // (Linux cm.c: the REQ's is the active side's rq_psn and the passive
      // side's sq_psn; the REP's the other way round).
      qp_attr->rq_psn = id->psn;
      mask |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
      // As the kernel's IB CM (cm_init_qp_rtr_attr): the responders of RC and XRC.
      if (id->pub.qp_type == IBV_QPT_RC || id->pub.qp_type == IBV_QPT_XRC_RECV) {
        qp_attr->max_dest_rd_atomic = id->responder_resources;
        qp_attr->min_rnr_timer = 0;  // what the kernel's IB CM sets
        mask |= IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
      }
      break;
    case IBV_QPS_RTS:
      qp_attr->sq_psn = is_ud(id) ? 0 : id->remote_psn;
      mask |= IBV_QP_SQ_PSN;
      if (is_ud(id)) break;
      if (!id->connected_info) return fail(EINVAL);
      qp_attr->timeout = id->ack_timeout;
      mask |= IBV_QP_TIMEOUT;
      if (id->pub.qp_type == IBV_QPT_XRC_RECV) break;  // it sends nothing (cm_init_qp_rts_attr)
      qp_attr->retry_cnt = id->retry_count;
      qp_attr->rnr_retry = id->rnr_retry_count;
      qp_attr->max_rd_atomic = id->initiator_depth;
      mask |= IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
      break;
    default:
      return fail(EINVAL);
  }
  *qp_attr_mask = mask;
  return 0;
}

int move_qp_to_rtr(Id* id) {
  if (!id->pub.qp) return 0;
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_INIT;
  if (qp_attributes_for(id, &attr, &mask) || modify(id->pub.qp, &attr, mask)) return -1;
  attr.qp_state = IBV_QPS_RTR;
  if (qp_attributes_for(id, &attr, &mask)) return -1;
  return modify(id->pub.qp, &attr, mask);
}

int move_qp_to_rts(Id* id) {
  if (!id->pub.qp) return 0;
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_RTS;
  if (qp_attributes_for(id, &attr, &mask)) return -1;
  return modify(id->pub.qp, &attr, mask);
}

int move_qp_to_error(Id* id) {
  if (!id->pub.qp) return 0;
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_ERR;
  return modify(id->pub.qp, &attr, IBV_QP_STATE);
}

}  // namespace sv::rdmacm

using namespace sv::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_init_qp_attr(struct rdma_cm_id* cm_id,
                                                         struct ibv_qp_attr* qp_attr,
                                                         int* qp_attr_mask) {
  if (!cm_id || !qp_attr || !qp_attr_mask) return fail(EINVAL);
  CmLock lock(cm_mutex());
  return qp_attributes_for(id_of(cm_id), qp_attr, qp_attr_mask);
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_create_qp_ex(struct rdma_cm_id* cm_id,
                                                         struct ibv_qp_init_attr_ex* attr) {
  if (!cm_id || !attr) return fail(EINVAL);
  if (int e = call_fault(sv::faults::Call::kRdmaCreateQp)) return fail(e);  // (SOFTVERBS_FAULTS)
  return guarded(-1, [&] {
    CmLock lock(cm_mutex());
    return create_qp(id_of(cm_id), attr);
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_create_qp(struct rdma_cm_id* cm_id, struct ibv_pd* pd,
                                                      struct ibv_qp_init_attr* qp_init_attr) {
  if (!cm_id || !qp_init_attr) return fail(EINVAL);
  ibv_qp_init_attr_ex attr_ex{};
  std::memcpy(&attr_ex, qp_init_attr, sizeof *qp_init_attr);
  attr_ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  attr_ex.pd = pd ? pd : cm_id->pd;
  int rc = rdma_create_qp_ex(cm_id, &attr_ex);
  // The actual capabilities (and the CQs we created) go back to the caller.
  if (rc == 0) std::memcpy(qp_init_attr, &attr_ex, sizeof *qp_init_attr);
  return rc;
}

extern "C" SOFTVERBS_RDMACM_EXPORT void rdma_destroy_qp(struct rdma_cm_id* cm_id) {
  if (!cm_id) return;
  const int saved_errno = errno;
  if (cm_id->qp) ibv_destroy_qp(cm_id->qp);
  cm_id->qp = nullptr;
  destroy_cm_cqs(cm_id);
  errno = saved_errno;
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_create_srq_ex(struct rdma_cm_id* cm_id,
                                                          struct ibv_srq_init_attr_ex* attr) {
  if (!cm_id || !attr) return fail(EINVAL);
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_TYPE)) return fail(EINVAL);
  if (!cm_id->verbs) return fail(EINVAL);
  if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !attr->pd) {
    attr->pd = cm_id->pd;
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_PD;
  }
  // An XRC SRQ without a domain or CQ gets the device's domain and the id's
  // receive CQ (created now if there is none), as librdmacm does.
  bool made_cqs = false;
  if (attr->srq_type == IBV_SRQT_XRC) {
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !attr->xrcd) {
      Device* dev = device_of(cm_id->verbs);
      attr->xrcd = dev ? default_xrcd(dev) : nullptr;
      if (!attr->xrcd) return -1;
    }
    if (!(attr->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !attr->cq) {
      if (!cm_id->recv_cq) {
        if (create_cm_cqs(cm_id, 0, attr->attr.max_wr) != 0) return -1;
        made_cqs = true;
      }
      attr->cq = cm_id->recv_cq;
    }
    attr->comp_mask |= IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ;
  }
  ibv_srq* srq = ibv_create_srq_ex(cm_id->verbs, attr);
  if (!srq) {
    if (made_cqs) {
      int err = errno;
      destroy_cm_cqs(cm_id);
      errno = err;
    }
    return -1;
  }
  if (!cm_id->pd) cm_id->pd = attr->pd;
  cm_id->srq = srq;
  return 0;
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_create_srq(struct rdma_cm_id* cm_id, struct ibv_pd* pd,
                                                       struct ibv_srq_init_attr* attr) {
  if (!cm_id || !attr) return fail(EINVAL);
  ibv_srq_init_attr_ex attr_ex{};
  std::memcpy(&attr_ex, attr, sizeof *attr);
  attr_ex.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD;
  attr_ex.srq_type = cm_id->qp_type == IBV_QPT_XRC_RECV ? IBV_SRQT_XRC : IBV_SRQT_BASIC;
  attr_ex.pd = pd;
  int rc = rdma_create_srq_ex(cm_id, &attr_ex);
  std::memcpy(attr, &attr_ex, sizeof *attr);
  return rc;
}

extern "C" SOFTVERBS_RDMACM_EXPORT void rdma_destroy_srq(struct rdma_cm_id* cm_id) {
  if (!cm_id) return;
  const int saved_errno = errno;
  if (cm_id->srq) ibv_destroy_srq(cm_id->srq);
  cm_id->srq = nullptr;
  destroy_cm_cqs(cm_id);
  errno = saved_errno;
}
