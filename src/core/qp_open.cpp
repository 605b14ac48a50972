// ibv_open_qp: another handle on an XRC_RECV QP of an XRC domain, for a
// process (or context) that did not create it. A handle of the creating
// process forwards modify and query to the QP itself; a handle in another
// process can query the QP (from its shared state) but not modify it: its
// state machine runs in its creator. Destroying a handle only closes it.
// (With the kernel an XRC_RECV QP outlives its creator while handles are
// open; here it lives as long as the process that created it.)
#include <cerrno>

#include "core/qp.h"
#include "core/xrcd.h"

namespace sv {

Qp* open_qp(Context* ctx, const ibv_qp_open_attr& a) {
  constexpr uint32_t kNeeded = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
  if (a.comp_mask >= IBV_QP_OPEN_ATTR_RESERVED) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if ((a.comp_mask & kNeeded) != kNeeded || !a.xrcd || a.xrcd->context != ctx->ibv() ||
      a.qp_type != IBV_QPT_XRC_RECV) {
    errno = EINVAL;
    return nullptr;
  }
  Xrcd* xrcd = Xrcd::from(a.xrcd);
  shm::PeerTable& peers = ctx->host->peers();
  const shm::Peer* owner = peers.get(ctx->host->qpn_owner(a.qp_num));
  shm::QpShared* target = nullptr;
  if (owner) {
    auto* e = owner->at<shm::QpSlotEntry>(owner->header()->qp_table +
                                          uint64_t{shm::qpn_index(a.qp_num)} * sizeof(shm::QpSlotEntry));
    if (e && e->qpn.load(std::memory_order_acquire) == a.qp_num)
      target = owner->at<shm::QpShared>(e->shared_off.load(std::memory_order_acquire));
  }
  // Only an XRC_RECV QP of the same domain can be opened.
  if (!target || target->qpn != a.qp_num || target->type != IBV_QPT_XRC_RECV || target->xrcd_id != xrcd->id) {
    errno = EINVAL;
    return nullptr;
  }
  auto* h = new Qp();
  h->ctx = ctx;
  h->type = IBV_QPT_XRC_RECV;
  h->xrcd = xrcd;
  h->opened_shared = target;
  if (owner->self) {
    std::lock_guard g(ctx->objects_mu);
    auto it = ctx->qps.find(a.qp_num);
    if (it != ctx->qps.end()) h->opened_from = it->second;
  }
  ibv_qp& b = h->qp_base;
  b.context = ctx->ibv();
  b.qp_context = (a.comp_mask & IBV_QP_OPEN_ATTR_CONTEXT) ? a.qp_context : nullptr;
  b.qp_num = a.qp_num;
  b.handle = a.qp_num;
  b.qp_type = IBV_QPT_XRC_RECV;
  b.state = IBV_QPS_UNKNOWN;
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  xrcd->users.fetch_add(1);
  return h;
}

bool is_opened_handle(const Qp* qp) { return qp->opened_shared != nullptr; }

int modify_opened(Qp* h, ibv_qp_attr* attr, int mask) {
  return h->opened_from ? modify_qp(h->opened_from, attr, mask) : EOPNOTSUPP;
}

int query_opened(Qp* h, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) {
  if (h->opened_from) return query_qp(h->opened_from, attr, mask, init);
  const shm::QpShared& s = *h->opened_shared;
  *attr = ibv_qp_attr{};
  attr->qp_state = attr->cur_qp_state = static_cast<ibv_qp_state>(s.state.load(std::memory_order_acquire));
  attr->dest_qp_num = s.dest_qpn;
  attr->qp_access_flags = s.access_flags;
  attr->min_rnr_timer = static_cast<uint8_t>(s.min_rnr_timer);
  attr->max_dest_rd_atomic = static_cast<uint8_t>(s.max_dest_rd_atomic);
  attr->port_num = 1;
  if (init) {
    *init = ibv_qp_init_attr{};
    init->qp_context = h->qp_base.qp_context;
    init->qp_type = IBV_QPT_XRC_RECV;
  }
  return 0;
}

int close_opened(Qp* h) {
  h->xrcd->users.fetch_sub(1);
  delete h;
  return 0;
}

}  // namespace sv
