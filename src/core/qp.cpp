#include "core/qp.h"

#include "core/mr.h"
#include "core/mw.h"
#include "core/raw.h"
#include "core/xrcd.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <iterator>
#include <cstring>

#include "core/async_events.h"
#include "core/check.h"
#include "core/check_buffers.h"
#include "core/deferred_sends.h"
#include "core/device_profile.h"
#include "core/faults.h"
#include "core/trace.h"
#include "core/limits.h"
#include "util/knobs.h"
#include "core/post_hooks.h"
#include "core/limit_reached.h"
#include "core/object_budget.h"
#include "core/qp_state.h"
#include "core/requester.h"
#include "core/scheduler.h"
#include "core/transport.h"
#include "util/bits.h"
#include "util/raw_enum.h"
#include "util/log.h"

namespace sv {

namespace {
ObjectBudget g_qp_budget;  // QPs of the process (max_qp is the profile's)
}  // namespace

namespace {

constexpr uint32_t kKnownInitMask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_XRCD | IBV_QP_INIT_ATTR_CREATE_FLAGS |
                                    IBV_QP_INIT_ATTR_MAX_TSO_HEADER | IBV_QP_INIT_ATTR_IND_TABLE |
                                    IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
constexpr uint32_t kKnownCreateFlags = IBV_QP_CREATE_BLOCK_SELF_MCAST_LB | IBV_QP_CREATE_SCATTER_FCS |
                                       IBV_QP_CREATE_CVLAN_STRIPPING | IBV_QP_CREATE_SOURCE_QPN |
                                       IBV_QP_CREATE_PCI_WRITE_END_PADDING;
constexpr uint64_t kKnownSendOps = (IBV_QP_EX_WITH_ATOMIC_WRITE << 1) - 1;

// The send operations the IB transport defines for each QP type...
uint64_t send_ops_valid_for(ibv_qp_type t) {
  constexpr uint64_t kUc = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | IBV_QP_EX_WITH_SEND |
                           IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW |
                           IBV_QP_EX_WITH_SEND_WITH_INV;
  switch (t) {
    case IBV_QPT_RC:
    case IBV_QPT_XRC_SEND:
      return kUc | IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
             IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_ATOMIC_WRITE;
    case IBV_QPT_UC:
      return kUc;
    case IBV_QPT_UD:
      return IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM;
    case IBV_QPT_RAW_PACKET:
      return IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_TSO;
    default:
      return 0;
  }
}

// ...and those this device implements.
uint64_t send_ops_supported_for(ibv_qp_type t) {
  constexpr uint64_t kImplemented = IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
                                    IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | IBV_QP_EX_WITH_RDMA_READ |
                                    IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
                                    IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_SEND_WITH_INV |
                                    IBV_QP_EX_WITH_TSO;
  return send_ops_valid_for(t) & kImplemented;
}

bool opcode_allowed(ibv_qp_type t, int op) {
  const bool rc_like = t == IBV_QPT_RC || t == IBV_QPT_XRC_SEND;
  switch (op) {
    case IBV_WR_SEND:
      return t != IBV_QPT_XRC_RECV;  // which sends nothing
    case IBV_WR_SEND_WITH_IMM:
      return t != IBV_QPT_XRC_RECV && t != IBV_QPT_RAW_PACKET;  // a raw frame carries no immediate
    case IBV_WR_TSO:
      return t == IBV_QPT_RAW_PACKET;
    case IBV_WR_RDMA_WRITE:
    case IBV_WR_RDMA_WRITE_WITH_IMM:
    case IBV_WR_LOCAL_INV:
    case IBV_WR_BIND_MW:
    case IBV_WR_SEND_WITH_INV:
      return rc_like || t == IBV_QPT_UC;
    case IBV_WR_RDMA_READ:
      return rc_like;
    case IBV_WR_ATOMIC_CMP_AND_SWP:
    case IBV_WR_ATOMIC_FETCH_AND_ADD:
      // (Not on a device without atomics, atomic_cap NONE: siw refuses the
      // post, EINVAL.)
      return rc_like && device_profile().atomic_cap != IBV_ATOMIC_NONE;
    default:
      // ATOMIC_WRITE: not on this device.
      return false;
  }
}

// SOFTVERBS_CHECK's sq-overrun (core/check.h): the send queue is full and
// none of its work requests will ever complete to free it. Under sq_mu.
void check_sq_overrun(Qp* qp) {
  if (qp->sig_all) return;
  for (uint64_t pos = qp->sq_head.load(std::memory_order_acquire); pos != qp->sq_tail; ++pos)
    if (qp->slot(pos).signaled) return;
  check::report("sq-overrun",
                "ibv_post_send(QP %#x): the send queue is full (%u work requests), none of them signaled: "
                "unsignaled work requests give their slots back only when a later signaled one completes "
                "(ibv_post_send(3)), so it stays full; signal one every max_send_wr at least",
                qp->qp_base.qp_num, qp->cap.max_send_wr);
}

// SOFTVERBS_CHECK's cq-too-small: what the QP may have completing at once
// on its CQs, added (+1) or taken off (-1).
void check_cq_load(Qp* qp, int sign) {
  auto add = [&](Cq* cq, uint64_t n) {
    if (!cq || !n) return;
    const uint64_t load = sign > 0 ? cq->check_load.fetch_add(n) + n : cq->check_load.fetch_sub(n) - n;
    if (sign > 0 && load > static_cast<uint64_t>(cq->cqe) && !cq->check_reported.exchange(true))
      check::report("cq-too-small",
                    "ibv_create_qp(QP %#x): its CQ holds %d completions, but the QPs on it may have %lu "
                    "outstanding at once (their max_send_wr and max_recv_wr): it can overrun "
                    "(IBV_EVENT_CQ_ERR, its QPs to ERR)",
                    qp->qp_base.qp_num, cq->cqe, static_cast<unsigned long>(load));
  };
  add(qp->scq, qp->cap.max_send_wr);
  add(qp->rcq, qp->cap.max_recv_wr);
}

// Checks the ibv_qp_init_attr_ex; 0 or the errno the verbs specify.
int check_init_attr(Context* ctx, const ibv_qp_init_attr_ex& a) {
  if (a.comp_mask & ~kKnownInitMask) return EINVAL;
  switch (raw_enum(a.qp_type)) {
    case IBV_QPT_RC:
    case IBV_QPT_UC:
    case IBV_QPT_UD:
    case IBV_QPT_XRC_SEND:
      break;
    case IBV_QPT_XRC_RECV:
      // The target side of XRC: a domain, and nothing else (no PD, CQs,
      // queues: what it receives goes to the domain's SRQs).
      if (!(a.comp_mask & IBV_QP_INIT_ATTR_XRCD) || !a.xrcd || a.xrcd->context != ctx->ibv()) return EINVAL;
      if (a.comp_mask & (IBV_QP_INIT_ATTR_SEND_OPS_FLAGS | IBV_QP_INIT_ATTR_CREATE_FLAGS)) return EINVAL;
      return (a.comp_mask & (IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH | IBV_QP_INIT_ATTR_MAX_TSO_HEADER))
                 ? EINVAL
                 : 0;
    case IBV_QPT_RAW_PACKET:
      break;
    case IBV_QPT_DRIVER:
      return EOPNOTSUPP;  // vendor QPs: this device has none
    default:
      return EINVAL;
  }
  if (!(a.comp_mask & IBV_QP_INIT_ATTR_PD) || !a.pd) return EINVAL;
  if (a.pd->context != ctx->ibv()) return EINVAL;
  if (a.comp_mask & IBV_QP_INIT_ATTR_XRCD) return EINVAL;  // for XRC_RECV QPs only
  const bool raw = a.qp_type == IBV_QPT_RAW_PACKET;
  // Receive-side scaling: a raw QP that receives through the work queues
  // of an indirection table, by a Toeplitz hash of the fields asked for.
  const uint32_t rss = a.comp_mask & (IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH);
  if (rss) {
    if (!raw || rss != (IBV_QP_INIT_ATTR_IND_TABLE | IBV_QP_INIT_ATTR_RX_HASH) || !a.rwq_ind_tbl) return EINVAL;
    const ibv_rx_hash_conf& h = a.rx_hash_conf;
    if (h.rx_hash_function != IBV_RX_HASH_FUNC_TOEPLITZ) return h.rx_hash_function ? EOPNOTSUPP : EINVAL;
    if (h.rx_hash_key_len != 40 || !h.rx_hash_key) return EINVAL;  // Toeplitz: a 40-byte key
    if (h.rx_hash_fields_mask & (IBV_RX_HASH_IPSEC_SPI | IBV_RX_HASH_INNER)) return EOPNOTSUPP;
    if (h.rx_hash_fields_mask & ~static_cast<uint64_t>(0xff)) return EINVAL;
    if (a.srq || a.cap.max_send_wr) return EINVAL;  // it only receives, through its work queues
  }
  if (a.comp_mask & IBV_QP_INIT_ATTR_MAX_TSO_HEADER) {
    if (!raw || a.max_tso_header > limits::kMaxTsoHeader) return EINVAL;
  }
  if (a.comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) {
    if (a.create_flags & ~kKnownCreateFlags) return EINVAL;
    // What each flag means here: multicast loopback blocking for the QPs
    // that receive multicast (UD; a raw QP never sees its own frames
    // anyway); FCS scattering and C-VLAN stripping for raw frames. A
    // source QPN (IPoIB) and PCI end padding have no meaning here.
    uint32_t supported = a.qp_type == IBV_QPT_UD ? IBV_QP_CREATE_BLOCK_SELF_MCAST_LB
                         : raw ? IBV_QP_CREATE_BLOCK_SELF_MCAST_LB | IBV_QP_CREATE_SCATTER_FCS |
                                     IBV_QP_CREATE_CVLAN_STRIPPING
                               : 0;
    if (a.create_flags & ~supported) return EOPNOTSUPP;
  }
  if (a.comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
    if (a.send_ops_flags & ~kKnownSendOps) return EINVAL;
    if (a.send_ops_flags & ~send_ops_valid_for(a.qp_type)) return EINVAL;
    if (a.send_ops_flags & ~send_ops_supported_for(a.qp_type)) return EOPNOTSUPP;
  }
  // XRC_SEND QPs receive nothing: a receive CQ, SRQ and receive caps are ignored.
  const bool xrc_send = a.qp_type == IBV_QPT_XRC_SEND;
  if (rss) {  // no send queue, and receives complete on the work queues' CQs
    if ((a.send_cq && a.send_cq->context != ctx->ibv()) || (a.recv_cq && a.recv_cq->context != ctx->ibv()))
      return EINVAL;
    return 0;
  }
  if (!a.send_cq || (!a.recv_cq && !xrc_send)) return EINVAL;
  if (a.send_cq->context != ctx->ibv() || (a.recv_cq && a.recv_cq->context != ctx->ibv())) return EINVAL;
  if (a.srq && !xrc_send) {
    // ibv_create_qp(3): only RC and UD QPs may use an SRQ.
    if (a.qp_type != IBV_QPT_RC && a.qp_type != IBV_QPT_UD) return EINVAL;
    if (a.srq->context != ctx->ibv()) return EINVAL;
  }
  // The device's limits (core/device_profile.h: softverbs' own unless a
  // profile names another device's).
  const DeviceProfile& dev = device_profile();
  const ibv_qp_cap& c = a.cap;
  if (c.max_send_wr > dev.max_qp_wr || c.max_send_sge > dev.max_sge || c.max_inline_data > dev.max_inline_data)
    return EINVAL;
  if (!a.srq && !xrc_send && (c.max_recv_wr > dev.max_qp_wr || c.max_recv_sge > dev.max_sge)) return EINVAL;
  return 0;
}

// Value checks for the attributes named in `mask` (the mask itself was
// already checked against the state table).
int check_attr_values(Qp* qp, const ibv_qp_attr& a, int mask) {
  if ((mask & IBV_QP_CUR_STATE) && raw_enum(a.cur_qp_state) != qp->state()) return EINVAL;
  if ((mask & IBV_QP_PKEY_INDEX) && a.pkey_index >= limits::kMaxPkeys) return EINVAL;
  if ((mask & IBV_QP_PORT) && a.port_num != 1) return EINVAL;
  if ((mask & IBV_QP_AV)) {
    if (int e = check_ah_attr(qp->ctx, a.ah_attr)) return e;
  }
  // Alternate paths (APM) do not exist on RoCE: the kernel refuses them too.
  if (mask & IBV_QP_ALT_PATH) return EINVAL;
  if ((mask & IBV_QP_PATH_MIG_STATE) && raw_enum(a.path_mig_state) != IBV_MIG_MIGRATED) return EINVAL;
  if ((mask & IBV_QP_PATH_MTU) && (raw_enum(a.path_mtu) < IBV_MTU_256 || raw_enum(a.path_mtu) > IBV_MTU_4096))
    return EINVAL;
  if ((mask & IBV_QP_TIMEOUT) && a.timeout > 31) return EINVAL;
  // retry_cnt, rnr_retry and min_rnr_timer above their 3- and 5-bit wire
  // fields are accepted, as the kernel, rxe and mlx5 accept them (they
  // store or truncate them); apply_attrs says what they mean here.
  if ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a.max_rd_atomic > device_profile().max_qp_init_rd_atom) return EINVAL;
  if ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a.max_dest_rd_atomic > device_profile().max_qp_rd_atom) return EINVAL;
  // Access flags are not checked: programs pass the word they gave
  // ibv_reg_mr (LOCAL_WRITE, ON_DEMAND, MW_BIND ...), and the kernel, rxe and
  // mlx5 accept it and use its remote bits. A destination QPN is 24 bits on
  // the wire; mlx5 keeps those, as we do.
  return 0;
}

uint32_t mtu_bytes(ibv_mtu m) { return 128u << m; }

// Copies the attributes in `mask` into the QP and what peers see of it.
void apply_attrs(Qp* qp, const ibv_qp_attr& a, int mask) {
  ibv_qp_attr& q = qp->attr;
  shm::QpShared* s = qp->shared;
  if (mask & IBV_QP_PKEY_INDEX) q.pkey_index = a.pkey_index;
  if (mask & IBV_QP_PORT) q.port_num = a.port_num;
  if (mask & IBV_QP_QKEY) s->qkey = q.qkey = a.qkey;
  if (mask & IBV_QP_ACCESS_FLAGS) s->access_flags = q.qp_access_flags = a.qp_access_flags;
  if (mask & IBV_QP_PATH_MTU) {
    q.path_mtu = a.path_mtu;
    s->path_mtu = mtu_bytes(a.path_mtu);
  }
  if (mask & IBV_QP_AV) {
    q.ah_attr = a.ah_attr;
    uint32_t qpn = qp->peer.qpn;
    qp->peer = resolve_destination(qp->ctx, a.ah_attr);
    qp->peer.qpn = qpn;
    s->dgid = qp->peer.dgid;
    s->sgid_index = qp->peer.sgid_index;
  }
  if (mask & IBV_QP_DEST_QPN) {
    q.dest_qp_num = a.dest_qp_num;
    s->dest_qpn = qp->peer.qpn = a.dest_qp_num & 0xffffff;
  }
  // Another user's QP on this host is reached through the host service.
  if ((mask & (IBV_QP_AV | IBV_QP_DEST_QPN)) && qp->peer.route == qp->ctx->local_transport)
    qp->peer.route = qp->ctx->transport_for(qp->peer.dgid, qp->peer.qpn);
  if (mask & IBV_QP_RQ_PSN) s->rq_psn = q.rq_psn = a.rq_psn & 0xffffff;
  if (mask & IBV_QP_SQ_PSN) q.sq_psn = a.sq_psn & 0xffffff;
  if (mask & IBV_QP_MAX_DEST_RD_ATOMIC) s->max_dest_rd_atomic = q.max_dest_rd_atomic = a.max_dest_rd_atomic;
  if (mask & IBV_QP_MAX_QP_RD_ATOMIC) q.max_rd_atomic = a.max_rd_atomic;
  // Reported as given (as rxe does); used through the 5-bit AETH field.
  if (mask & IBV_QP_MIN_RNR_TIMER) s->min_rnr_timer = (q.min_rnr_timer = a.min_rnr_timer) & 31;
  if (mask & IBV_QP_TIMEOUT) q.timeout = a.timeout;
  // Reported as given; used through retry_budget() and rnr_retry_budget().
  if (mask & IBV_QP_RETRY_CNT) q.retry_cnt = a.retry_cnt;
  if (mask & IBV_QP_RNR_RETRY) q.rnr_retry = a.rnr_retry;
  if (mask & IBV_QP_PATH_MIG_STATE) q.path_mig_state = a.path_mig_state;
  if (mask & IBV_QP_EN_SQD_ASYNC_NOTIFY) q.en_sqd_async_notify = a.en_sqd_async_notify;
}

void set_state(Qp* qp, ibv_qp_state st) {
  if (__builtin_expect(trace::g_on, 0)) trace::state(qp, st);
  qp->attr.qp_state = qp->attr.cur_qp_state = st;
  qp->qp_base.state = st;
  qp->shared->state.store(st, std::memory_order_release);
}

// RESET drops everything queued, without completions, as the verbs say.
void reset_queues(Qp* qp) {
  qp->sq_exec = qp->sq_tail;
  qp->sq_head.store(qp->sq_tail, std::memory_order_release);
  qp->resume_at_ns = 0;
  qp->ctx->for_each_transport([qp](Transport& t) { t.forget_qp(qp->qp_base.qp_num, false); });
  if (!qp->srq_obj && qp->rq.shared()) qp->rq.discard_all();
  qp->shared->remote_error.store(0, std::memory_order_release);
  qp->shared->established.store(0, std::memory_order_release);
  qp->attr = ibv_qp_attr{};
  qp->attr.path_mig_state = IBV_MIG_MIGRATED;
  qp->attr.cap = qp->cap;
}

// A QP's transports must be listening before its first packet comes: its
// peer's route, or for UD (which hears from anyone) every one.
void listen_if_remote(Qp* qp) {
  if (qp->type == IBV_QPT_RAW_PACKET) return;
  if (qp->type == IBV_QPT_UD)
    qp->ctx->for_each_transport([](Transport& t) { t.listen(); });
  else if (qp->peer.route)
    qp->peer.route->listen();
}

// The QP's transports learn its send parameters before it sends (and again
// when they change): its peer's route, or for UD every one.
void ready_to_send(Qp* qp) {
  if (qp->type == IBV_QPT_RAW_PACKET) return;
  const SendParams p{qp->attr.sq_psn, qp->attr.path_mtu, qp->attr.timeout, qp->attr.retry_cnt, qp->attr.rnr_retry};
  const uint32_t qpn = qp->qp_base.qp_num;
  if (qp->type == IBV_QPT_UD)
    qp->ctx->for_each_transport([&](Transport& t) { t.ready_to_send(qpn, p, qp->send_answers); });
  else if (qp->peer.route)
    qp->peer.route->ready_to_send(qpn, p, qp->send_answers);
}

// Errors that a peer's responder flagged on this QP take effect here.
void absorb_remote_error_locked(Qp* qp) {
  if (qp->shared->remote_error.load(std::memory_order_acquire) && qp->state() != IBV_QPS_ERR &&
      qp->state() != IBV_QPS_RESET)
    enter_error_locked(qp);
}

// Drops the completions of `qp` still waiting in its CQs
// (forget_qp_completions). Those in the send CQ's local ring must no longer
// point at it either: polling one would move its send queue's head back.
// Only the entries waiting are looked at, with both of the ring's ends held
// still: walking the whole ring made each destroy cost the CQ's size
// (65536 QPs on a CQ of 131072 entries took 8.7 s to destroy).
void forget_completions(Qp* qp, bool with_stragglers) {
  if (Cq* cq = qp->scq) {
    std::lock_guard c(cq->poll_mu);  // (in resize_cq's order)
    std::lock_guard p(cq->produce_mu);
    const uint64_t tail = cq->local_tail.load(std::memory_order_relaxed);
    for (uint64_t pos = cq->local_head.load(std::memory_order_relaxed); pos != tail; ++pos)
      if (LocalCqe& l = cq->local[pos & cq->mask]; l.qp == qp) l.qp = nullptr;
  }
  Cq* const cqs[] = {qp->scq, qp->rcq, qp->srq_obj ? qp->srq_obj->cq : nullptr};
  for (size_t i = 0; i < std::size(cqs); ++i)
    if (cqs[i] && std::find(cqs, cqs + i, cqs[i]) == cqs + i)
      forget_qp_completions(cqs[i], qp->qp_base.qp_num, with_stragglers);
}

}  // namespace

Qp* create_qp(Context* ctx, ibv_qp_init_attr_ex* attr) {
  if (int e = faults::call(faults::Call::kCreateQp)) {
    errno = e;
    return nullptr;
  }
  if (int e = check_init_attr(ctx, *attr)) {
    SV_INFO("create_qp refused (%s)", strerror(e));
    errno = e;
    return nullptr;
  }
  if (!g_qp_budget.take(device_profile().max_qp)) {
    limit_reached(Limit::kQps, device_profile().max_qp);
    errno = ENOMEM;  // (the profile's max_qp)
    return nullptr;
  }
  shm::Arena& arena = ctx->host->arena();
  int64_t idx = arena.take_qp_index();
  if (idx < 0) {
    g_qp_budget.give();
    name_limit_reached(arena.qp_names_ran_out(), Limit::kQpNumbers, limits::kMaxQp);
    errno = ENOMEM;
    return nullptr;
  }
  auto* qp = new Qp();
  qp->ctx = ctx;
  const bool xrc_recv = attr->qp_type == IBV_QPT_XRC_RECV, xrc_send = attr->qp_type == IBV_QPT_XRC_SEND;
  const bool rss = attr->comp_mask & IBV_QP_INIT_ATTR_IND_TABLE;
  qp->pd_obj = xrc_recv ? nullptr : Pd::from(attr->pd);
  qp->scq = (xrc_recv || rss) ? nullptr : Cq::from(attr->send_cq);
  qp->rcq = (xrc_recv || xrc_send || rss) ? nullptr : Cq::from(attr->recv_cq);
  qp->srq_obj = (attr->srq && !xrc_recv && !xrc_send) ? Srq::from(attr->srq) : nullptr;
  qp->xrcd = xrc_recv ? Xrcd::from(attr->xrcd) : nullptr;
  qp->index = static_cast<uint32_t>(idx);
  qp->type = attr->qp_type;
  qp->sig_all = attr->sq_sig_all != 0;
  qp->block_self_mcast = (attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
                         (attr->create_flags & IBV_QP_CREATE_BLOCK_SELF_MCAST_LB);
  qp->send_ops_flags = (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) ? attr->send_ops_flags : 0;
  if (attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) {
    qp->scatter_fcs = attr->create_flags & IBV_QP_CREATE_SCATTER_FCS;
    qp->cvlan_strip = attr->create_flags & IBV_QP_CREATE_CVLAN_STRIPPING;
  }
  if (attr->comp_mask & IBV_QP_INIT_ATTR_MAX_TSO_HEADER) qp->max_tso_header = attr->max_tso_header;
  if (rss) {
    qp->ind_table = RwqIndTable::from(attr->rwq_ind_tbl);
    const ibv_rx_hash_conf& h = attr->rx_hash_conf;
    qp->rss_key.assign(h.rx_hash_key, h.rx_hash_key + h.rx_hash_key_len);
    qp->rss_fields = h.rx_hash_fields_mask;
  }

  ibv_qp_cap& c = qp->cap;
  c.max_send_wr = static_cast<uint32_t>(round_up_pow2(std::max(attr->cap.max_send_wr, 1u)));
  c.max_send_sge = std::max(attr->cap.max_send_sge, 1u);
  // Every send slot has room for at least one granule of inline data, and
  // we say so even when none was asked for, as hardware and rxe do
  // (rdma_xclient posts a 16-byte IBV_SEND_INLINE with max_inline_data 0).
  // (No more than the device allows, should the granule overshoot it.)
  c.max_inline_data = static_cast<uint32_t>(std::min<uint64_t>(
      align_up(std::max(attr->cap.max_inline_data, 1u), limits::kInlineGranule), device_profile().max_inline_data));
  if (qp->srq_obj || xrc_send || xrc_recv || rss) {
    c.max_recv_wr = c.max_recv_sge = 0;  // ignored with an SRQ; XRC and RSS QPs have no receive queue
  } else {
    c.max_recv_wr = attr->cap.max_recv_wr ? static_cast<uint32_t>(round_up_pow2(attr->cap.max_recv_wr)) : 0;
    c.max_recv_sge = std::max(attr->cap.max_recv_sge, 1u);
  }

  qp->shared_off = arena.alloc(sizeof(shm::QpShared));
  int err = qp->shared_off ? 0 : ENOMEM;
  if (err) limit_reached(Limit::kSharedMemory, knobs().arena_bytes);
  if (!err && !qp->srq_obj && !xrc_send && !xrc_recv && !rss)
    err = qp->rq.init(arena, c.max_recv_wr, c.max_recv_sge, false, qp->pd_obj->id, ctx->index);
  // A raw packet QP lives on a network interface; CAP_NET_RAW, as the kernel asks.
  if (!err && qp->type == IBV_QPT_RAW_PACKET) {
    err = raw_attach(qp);
    if (err && !qp->srq_obj && qp->rq.shared()) qp->rq.release(arena);
  }
  if (err) {
    if (qp->shared_off) arena.free(qp->shared_off, sizeof(shm::QpShared));
    arena.give_qp_index(qp->index);
    g_qp_budget.give();
    delete qp;
    errno = err;
    return nullptr;
  }
  qp->sq.resize(c.max_send_wr);
  if (trace::g_on) qp->trace_posted.resize(c.max_send_wr);
  qp->sq_sges.resize(uint64_t{c.max_send_wr} * c.max_send_sge);
  qp->sq_inline.resize(uint64_t{c.max_send_wr} * c.max_inline_data);
  if (qp->type == IBV_QPT_UD) qp->sq_ud.resize(c.max_send_wr);
  if (xrc_send) qp->sq_xrc_srqn.resize(c.max_send_wr);
  if (qp->max_tso_header) qp->sq_tso_hdr.resize(uint64_t{c.max_send_wr} * qp->max_tso_header);
  if (rss) c = ibv_qp_cap{};  // it neither sends nor has a receive queue of its own
  if (xrc_recv) c = ibv_qp_cap{};  // it sends nothing either
  qp->sq_mask = c.max_send_wr - 1;
  if (check::on() && c.max_send_wr) check::size_post_records(qp);
  attr->cap = c;  // written back: >= what was asked

  uint32_t qpn = arena.qpn_of(qp->index);
  shm::QpShared* s = qp->shared = arena.at<shm::QpShared>(qp->shared_off);
  s->qpn = qpn;
  s->type = qp->type;
  s->pd = qp->pd_obj ? qp->pd_obj->id : 0;
  s->ctx_index = ctx->index;
  s->rq_off = qp->srq_obj ? 0 : qp->rq.shared_off();
  s->srq_off = qp->srq_obj ? qp->srq_obj->rq.shared_off() : 0;
  s->recv_cq_off = qp->rcq ? qp->rcq->shared_off : 0;
  s->xrcd_id = qp->xrcd ? qp->xrcd->id : 0;
  s->state.store(IBV_QPS_RESET, std::memory_order_relaxed);

  ibv_qp& b = qp->qp_base;
  b.context = ctx->ibv();
  b.qp_context = attr->qp_context;
  // An XRC_RECV QP has no PD of its own; the one given is kept for the
  // application, as libibverbs does (librdmacm reads it back).
  b.pd = (qp->pd_obj || (attr->comp_mask & IBV_QP_INIT_ATTR_PD)) ? attr->pd : nullptr;
  b.send_cq = qp->scq ? attr->send_cq : nullptr;
  b.recv_cq = qp->rcq ? attr->recv_cq : nullptr;
  b.srq = qp->srq_obj ? attr->srq : nullptr;
  b.handle = qpn;
  b.qp_num = qpn;
  b.qp_type = qp->type;
  pthread_mutex_init(&b.mutex, nullptr);
  pthread_cond_init(&b.cond, nullptr);
  reset_queues(qp);
  set_state(qp, IBV_QPS_RESET);
  install_qp_ex_ops(qp);

  if (qp->pd_obj) qp->pd_obj->users().fetch_add(1);
  if (qp->scq) qp->scq->users.fetch_add(1);
  if (qp->rcq) qp->rcq->users.fetch_add(1);
  if (check::on()) check_cq_load(qp, +1);
  if (qp->srq_obj) qp->srq_obj->users.fetch_add(1);
  if (qp->xrcd) qp->xrcd->users.fetch_add(1);
  if (qp->ind_table) qp->ind_table->qps.fetch_add(1);
  {
    std::lock_guard g(ctx->objects_mu);
    ctx->qps[qpn] = qp;
  }
  shm::QpSlotEntry& e = arena.qp_table()[qp->index];
  e.shared_off.store(qp->shared_off, std::memory_order_relaxed);
  e.qpn.store(qpn, std::memory_order_release);
  return qp;
}

int modify_qp(Qp* qp, ibv_qp_attr* attr, int mask) {
  if (int e = faults::call(faults::Call::kModifyQp)) return e;
  if (is_opened_handle(qp)) return modify_opened(qp, attr, mask);
  // As the kernel's uverbs does before checking the mask (modify_qp_mask()):
  // each side of XRC ignores the other side's attributes, so applications
  // may pass RC's masks (perftest does).
  if (qp->type == IBV_QPT_XRC_SEND) mask &= ~(IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (qp->type == IBV_QPT_XRC_RECV) mask &= ~(IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY);
  DeferSends after_unlock;  // (a move to ERR sends what a flush let go once sq_mu is: RoceTransport::drop_sends)
  std::lock_guard g(qp->sq_mu);
  absorb_remote_error_locked(qp);
  ibv_qp_state cur = qp->state();
  int requested = (mask & IBV_QP_STATE) ? raw_enum(attr->qp_state) : cur;
  if (requested < IBV_QPS_RESET || requested > IBV_QPS_ERR) return EINVAL;
  ibv_qp_state next = static_cast<ibv_qp_state>(requested);
  if (!qp_mask_ok(cur, next, qp->type, static_cast<unsigned>(mask))) {
    SV_INFO("modify_qp %#x: %s -> %s with mask %#x is not a valid transition", qp->qp_base.qp_num,
            qp_state_name(cur), qp_state_name(next), mask);
    return EINVAL;
  }
  if (int e = check_attr_values(qp, *attr, mask)) return e;

  if (next == IBV_QPS_RESET) {
    reset_queues(qp);
    set_state(qp, IBV_QPS_RESET);
    // Its waiting completions go, as mlx5_modify_qp cleans them on RESET:
    // a program that resets QPs after an error and uses them again
    // (rdma-core's restate_qps) must not poll the flushes of before.
    if (cur != IBV_QPS_RESET) forget_completions(qp, /*with_stragglers=*/false);
    return 0;
  }
  apply_attrs(qp, *attr, mask);
  if (next == IBV_QPS_RTS && cur != IBV_QPS_RTS) {
    qp->retry_left = retry_budget(qp->attr.retry_cnt);
    qp->rnr_left = rnr_retry_budget(qp->attr.rnr_retry);
  }
  if (next == IBV_QPS_ERR) {
    enter_error_locked(qp);
    return 0;
  }
  if (next == IBV_QPS_RTR && cur != IBV_QPS_RTR) listen_if_remote(qp);
  set_state(qp, next);
  if (next == IBV_QPS_SQD && qp->attr.en_sqd_async_notify) {
    // The send queue is drained at once: WQEs execute synchronously.
    raise_async_local(qp->ctx, IBV_EVENT_SQ_DRAINED, shm::kAsyncQp, qp->qp_base.qp_num);
  }
  if (next == IBV_QPS_RTS) {
    ready_to_send(qp);
    run_send_queue_locked(qp);
  }
  return 0;
}

int query_qp(Qp* qp, ibv_qp_attr* attr, int mask, ibv_qp_init_attr* init) {
  if (is_opened_handle(qp)) return query_opened(qp, attr, mask, init);
  DeferSends after_unlock;  // (absorbing a remote error may flush: RoceTransport::drop_sends)
  std::lock_guard g(qp->sq_mu);
  absorb_remote_error_locked(qp);
  *attr = qp->attr;
  attr->cur_qp_state = qp->state();
  attr->cap = qp->cap;
  attr->sq_draining = 0;
  if (init) {
    *init = ibv_qp_init_attr{};
    init->qp_context = qp->qp_base.qp_context;
    init->send_cq = qp->qp_base.send_cq;
    init->recv_cq = qp->qp_base.recv_cq;
    init->srq = qp->qp_base.srq;
    init->cap = qp->cap;
    init->qp_type = qp->type;
    init->sq_sig_all = qp->sig_all;
  }
  return 0;
}

int destroy_qp(Qp* qp) {
  if (is_opened_handle(qp)) return close_opened(qp);
  // ibv_destroy_qp(3): it fails while the QP is attached to a multicast
  // group; flows steering to it hold it too.
  if (qp->mcast_groups.load() != 0 || qp->flows.load() != 0) return EBUSY;
  raw_detach(qp);  // no more frames for it
  Context* ctx = qp->ctx;
  shm::Arena& arena = ctx->host->arena();
  // Unpublish first: no peer can find the QP any more.
  arena.qp_table()[qp->index].qpn.store(0, std::memory_order_release);
  qp->shared->state.store(IBV_QPS_RESET, std::memory_order_release);
  cancel_resume(qp);
  ctx->for_each_transport([qp](Transport& t) { t.forget_qp(qp->qp_base.qp_num, true); });
  {
    std::lock_guard g(ctx->objects_mu);
    ctx->qps.erase(qp->qp_base.qp_num);
  }
  pthread_mutex_lock(&qp->qp_base.mutex);
  if (check::on() && qp->qp_base.events_completed != qp->async_reported)
    check::report("unacked-events",
                  "ibv_destroy_qp(QP %#x): %u async events from ibv_get_async_event not acknowledged "
                  "(ibv_ack_async_event): it waits for them",
                  qp->qp_base.qp_num, qp->async_reported - qp->qp_base.events_completed);
  while (qp->qp_base.events_completed != qp->async_reported)
    pthread_cond_wait(&qp->qp_base.cond, &qp->qp_base.mutex);
  pthread_mutex_unlock(&qp->qp_base.mutex);
  // And its waiting completions go with it, as on mlx5.
  forget_completions(qp, /*with_stragglers=*/true);
  if (!qp->srq_obj) qp->rq.release(arena);
  arena.free(qp->shared_off, sizeof(shm::QpShared));
  arena.give_qp_index(qp->index);
  if (check::on()) check_cq_load(qp, -1);
  if (qp->pd_obj) qp->pd_obj->users().fetch_sub(1);
  if (qp->scq) qp->scq->users.fetch_sub(1);
  if (qp->rcq) qp->rcq->users.fetch_sub(1);
  if (qp->srq_obj) qp->srq_obj->users.fetch_sub(1);
  if (qp->xrcd) qp->xrcd->users.fetch_sub(1);
  if (qp->ind_table) qp->ind_table->qps.fetch_sub(1);
  g_qp_budget.give();
  delete qp;
  return 0;
}

void enter_error_locked(Qp* qp) {
  const bool already = qp->state() == IBV_QPS_ERR;
  set_state(qp, IBV_QPS_ERR);
  qp->resume_at_ns = 0;
  flush_send_queue_locked(qp);
  flush_recv_queue(qp);
  // A QP of an SRQ takes no more WQEs from it: tell the owner it may now
  // destroy the QP without losing receives (IBV_EVENT_QP_LAST_WQE_REACHED).
  // Once per entry into ERR, as a device raises it: moving a QP that a
  // peer's error already put in ERR to ERR again (UCX does, before it waits
  // for this event) raises nothing new; UCX asserts on a second one.
  if (qp->srq_obj && !already)
    raise_async_local(qp->ctx, IBV_EVENT_QP_LAST_WQE_REACHED, shm::kAsyncQp, qp->qp_base.qp_num);
}

void enter_send_queue_error_locked(Qp* qp) {
  set_state(qp, IBV_QPS_SQE);
  qp->resume_at_ns = 0;
  flush_send_queue_locked(qp);
}

void handle_qp_attention(Cq* cq) {
  // (Bit 0: a peer flagged an error; check::kAttentionChecks stays.)
  if (!(cq->shared->attention.fetch_and(~1u, std::memory_order_relaxed) & 1)) return;
  std::vector<Qp*> hit;
  {
    std::lock_guard g(cq->ctx->objects_mu);
    for (auto& [qpn, qp] : cq->ctx->qps)
      if (qp->rcq == cq && qp->shared->remote_error.load(std::memory_order_acquire)) hit.push_back(qp);
  }
  for (Qp* qp : hit) {
    DeferSends after_unlock;  // (absorbing a remote error may flush: RoceTransport::drop_sends)
    std::lock_guard g(qp->sq_mu);
    absorb_remote_error_locked(qp);
  }
}

namespace {
void inject_post_fault(Qp* qp, faults::PostFault f);
}

int post_recv(Qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  if (__builtin_expect(faults::armed(), 0)) {
    if (int e = faults::call_fault(faults::Call::kPostRecv)) {
      *bad = wr;
      return e;
    }
    if (const faults::PostFault f = faults::post_fault_slow(qp->qp_base.qp_num, /*recv=*/true); f != faults::PostFault::kNone)
      inject_post_fault(qp, f);
  }
  if (qp->srq_obj || !qp->rq.shared()) {
    *bad = wr;
    return EINVAL;  // receives of this QP go to its SRQ; XRC QPs have no receive queue
  }
  ibv_qp_state st = qp->state();
  if (st == IBV_QPS_RESET) {
    *bad = wr;
    return EINVAL;
  }
  int rc = qp->rq.post(wr, bad);
  if (st == IBV_QPS_ERR || qp->shared->remote_error.load(std::memory_order_relaxed)) {
    DeferSends after_unlock;  // (absorbing a remote error may flush: RoceTransport::drop_sends)
    std::lock_guard g(qp->sq_mu);
    absorb_remote_error_locked(qp);
    if (qp->state() == IBV_QPS_ERR) flush_recv_queue(qp);
  }
  return rc;
}

namespace {

// A QP's move to ERR as after the device's own fatal error: what is posted
// from now on is flushed.
void fail_qp(Qp* qp) {
  DeferSends after_unlock;  // (the flush sends what it let go once sq_mu is: RoceTransport::drop_sends)
  std::lock_guard g(qp->sq_mu);
  if (qp->state() != IBV_QPS_RESET && qp->state() != IBV_QPS_ERR) enter_error_locked(qp);
}

// An event= or vanish= rule's fault at a post to `qp` (before its send
// queue lock: a DEVICE_FATAL takes every QP's).
[[gnu::noinline, gnu::cold]] void inject_post_fault(Qp* qp, faults::PostFault f) {
  Context* ctx = qp->ctx;
  switch (f) {
    case faults::PostFault::kCqErr:
      if (qp->scq) {
        raise_async_local(ctx, IBV_EVENT_CQ_ERR, shm::kAsyncCq, qp->scq->id);
        fail_qp(qp);
        break;
      }
      [[fallthrough]];
    case faults::PostFault::kQpFatal:
      raise_async_local(ctx, IBV_EVENT_QP_FATAL, shm::kAsyncQp, qp->qp_base.qp_num);
      fail_qp(qp);
      break;
    case faults::PostFault::kDeviceFatal: {
      raise_async_local(ctx, IBV_EVENT_DEVICE_FATAL, shm::kAsyncDevice, 0);
      PrivateVector<Qp*> all;
      {
        std::lock_guard g(ctx->objects_mu);
        for (const auto& [qpn, q] : ctx->qps) all.push_back(q);
      }
      for (Qp* q : all) fail_qp(q);
      break;
    }
    case faults::PostFault::kVanish:
      std::fflush(nullptr);
      kill(getpid(), SIGKILL);
      break;
    case faults::PostFault::kNone:
      break;
  }
}

// ibv_post_send, with SOFTVERBS_FAULTS' rules, SOFTVERBS_TRACE's timeline or
// SOFTVERBS_CHECK's checks (kFaults) or without: post_send chooses, so that without them they cost
// it one load and a branch.
template <bool kFaults>
[[gnu::always_inline]] inline int post_send_impl(Qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  if constexpr (kFaults) {
    if (int e = faults::call_fault(faults::Call::kPostSend)) {
      *bad = wr;
      return e;
    }
  }
  if constexpr (kFaults) {
    if (const faults::PostFault f = faults::post_fault(qp->qp_base.qp_num, /*recv=*/false); f != faults::PostFault::kNone)
      inject_post_fault(qp, f);
  }
  DeferSends after_unlock;  // (declared first: its end, which sends, comes after sq_mu's)
  std::lock_guard g(qp->sq_mu);
  absorb_remote_error_locked(qp);
  ibv_qp_state st = qp->state();
  if (st == IBV_QPS_RESET || st == IBV_QPS_INIT || st == IBV_QPS_RTR) {
    *bad = wr;
    return EINVAL;
  }
  int rc = 0;
  for (; wr; wr = wr->next) {
    const int op = raw_enum(wr->opcode);
    if (!opcode_allowed(qp->type, op) || wr->num_sge < 0 ||
        static_cast<uint32_t>(wr->num_sge) > qp->cap.max_send_sge) {
      rc = EINVAL;
      break;
    }
    if ((qp->type == IBV_QPT_UD && !wr->wr.ud.ah) || (op == IBV_WR_BIND_MW && !wr->bind_mw.mw) || qp->ind_table ||
        (op == IBV_WR_TSO && (wr->tso.hdr_sz > qp->max_tso_header || !wr->tso.mss || !wr->tso.hdr))) {
      rc = EINVAL;
      break;
    }
    if (qp->sq_tail - qp->sq_head.load(std::memory_order_acquire) >= qp->cap.max_send_wr) {
      SV_INFO("post_send on QP %#x: send queue full (%u WQEs; head %lu, executed up to %lu, tail %lu): "
              "poll the send CQ to free slots", qp->qp_base.qp_num, qp->cap.max_send_wr,
              static_cast<unsigned long>(qp->sq_head.load()), static_cast<unsigned long>(qp->sq_exec),
              static_cast<unsigned long>(qp->sq_tail));
      SV_INFO("  send CQ %u: armed %u event pending %u, local head %lu tail %lu, shared head %lu",
              qp->scq->id, qp->scq->shared->armed.load(), qp->scq->shared->event_pending.load(),
              static_cast<unsigned long>(qp->scq->local_head.load()),
              static_cast<unsigned long>(qp->scq->local_tail.load()),
              static_cast<unsigned long>(qp->scq->head));
      if (check::on()) check_sq_overrun(qp);
      rc = ENOMEM;
      break;
    }
    uint64_t pos = qp->sq_tail;
    Response answer{};
    faults::CompletionFault injected;  // (SOFTVERBS_FAULTS: queued, and failed or delayed in its turn)
    bool fault = false;
    if constexpr (kFaults) {
      fault = faults::completion_fault(qp->qp_base.qp_num, wr->opcode, &injected);
      if (trace::g_on) trace::posted(qp, pos);
      if (check::on()) check::record_post(qp, pos, *wr);
    }
    const DirectRun direct = fault ? DirectRun::kNotTaken : execute_direct(qp, pos, wr, &answer);
    if (direct == DirectRun::kDone) {
      qp->sq_tail = pos + 1;
      if constexpr (kFaults)
        if (trace::g_on) {
          uint64_t length = 0;
          for (int i = 0; i < wr->num_sge; ++i) length += wr->sg_list[i].length;
          trace::done(qp, pos, wr->wr_id, wr->opcode, length, IBV_WC_SUCCESS);
        }
      continue;
    }
    SendWqe& w = qp->slot(pos);
    w.wr_id = wr->wr_id;
    w.opcode = wr->opcode;
    w.flags = wr->send_flags;
    w.imm = wr->imm_data;
    w.signaled = qp->sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
    w.inlined = (wr->send_flags & IBV_SEND_INLINE) &&
                (wr->opcode == IBV_WR_SEND || wr->opcode == IBV_WR_SEND_WITH_IMM ||
                 wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
                 wr->opcode == IBV_WR_TSO);
    w.length = 0;
    for (int i = 0; i < wr->num_sge; ++i) w.length += wr->sg_list[i].length;
    if (w.inlined) {
      if (w.length > qp->cap.max_inline_data) {
        rc = EINVAL;
        break;
      }
      uint8_t* dst = qp->inline_buf(pos);
      for (int i = 0; i < wr->num_sge; ++i) {
        if (!wr->sg_list[i].length) continue;
        std::memcpy(dst, reinterpret_cast<const void*>(wr->sg_list[i].addr), wr->sg_list[i].length);
        dst += wr->sg_list[i].length;
      }
      w.num_sge = 0;
    } else {
      w.num_sge = static_cast<uint32_t>(wr->num_sge);
      if (wr->num_sge) std::memcpy(qp->sges(pos), wr->sg_list, sizeof(ibv_sge) * wr->num_sge);
    }
    if (wr->opcode == IBV_WR_RDMA_WRITE || wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ||
        wr->opcode == IBV_WR_RDMA_READ) {
      w.remote_addr = wr->wr.rdma.remote_addr;
      w.rkey = wr->wr.rdma.rkey;
    } else if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      w.remote_addr = wr->wr.atomic.remote_addr;
      w.rkey = wr->wr.atomic.rkey;
      w.compare_add = wr->wr.atomic.compare_add;
      w.swap = wr->wr.atomic.swap;
    } else if (wr->opcode == IBV_WR_BIND_MW) {
      // The window, the MR and the range travel in the WQE's own fields.
      const ibv_mw_bind_info& b = wr->bind_mw.bind_info;
      w.compare_add = reinterpret_cast<uint64_t>(Mw::from(wr->bind_mw.mw));
      w.swap = reinterpret_cast<uint64_t>(b.mr ? Mr::from(b.mr) : nullptr);
      w.remote_addr = b.addr;
      w.length = b.length;
      w.rkey = wr->bind_mw.rkey;
      w.imm = b.mw_access_flags;
      w.num_sge = 0;
    } else if (wr->opcode == IBV_WR_TSO) {
      // The header is copied now; the payload is the SGE list (or inline data).
      std::memcpy(qp->tso_hdr(pos), wr->tso.hdr, wr->tso.hdr_sz);
      w.rkey = wr->tso.hdr_sz;
      w.imm = wr->tso.mss;
    } else if (wr->opcode == IBV_WR_LOCAL_INV) {
      w.length = 0;  // imm holds invalidate_rkey (a union in ibv_send_wr)
      w.num_sge = 0;
    }
    if (qp->type == IBV_QPT_XRC_SEND) qp->sq_xrc_srqn[pos & qp->sq_mask] = wr->qp_type.xrc.remote_srqn;
    if (qp->type == IBV_QPT_UD) {
      Destination& d = qp->ud_dest(pos);
      d = Ah::from(wr->wr.ud.ah)->dest;
      d.qpn = wr->wr.ud.remote_qpn;
      // IBTA 10.2.4: a Q_Key with the high bit set means "use the QP's own".
      d.qkey = (wr->wr.ud.remote_qkey & 0x80000000u) ? qp->attr.qkey : wr->wr.ud.remote_qkey;
    }
    qp->sq_tail = pos + 1;
    if constexpr (kFaults)
      if (fault) qp->fault_wqes.emplace_back(pos, injected);
    if (direct == DirectRun::kAnswered) answer_direct(qp, pos, answer);
  }
  if (rc) *bad = wr;
  run_send_queue_locked(qp);
  return rc;
}

}  // namespace

int post_send(Qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  return __builtin_expect(faults::armed() | g_post_hooks, 0) ? post_send_impl<true>(qp, wr, bad)
                                                             : post_send_impl<false>(qp, wr, bad);
}

}  // namespace sv
