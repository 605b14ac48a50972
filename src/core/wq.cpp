// Receive work queues (ibv_create_wq) and the indirection tables of
// receive-side scaling (ibv_create_rwq_ind_table): an RSS QP spreads the
// frames its flows steer to it over the table's work queues.
#include <cerrno>

#include "core/cq.h"
#include "core/device_profile.h"
#include "core/limits.h"
#include "core/raw.h"

namespace sv {
namespace {

std::atomic<uint32_t> g_wq_num{1};
std::atomic<int> g_table_num{1};

int post_wq_recv(ibv_wq* w, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  Wq* wq = Wq::from(w);
  if (wq->state == IBV_WQS_RESET) {  // as a QP in RESET: nothing may be posted yet
    *bad = wr;
    return EINVAL;
  }
  return wq->rq.post(wr, bad);
}

}  // namespace

Wq* create_wq(Context* ctx, ibv_wq_init_attr* attr) {
  auto fail = [](int e) -> Wq* {
    errno = e;
    return nullptr;
  };
  if (attr->comp_mask & ~static_cast<uint32_t>(IBV_WQ_INIT_ATTR_FLAGS)) return fail(EINVAL);
  if (attr->wq_type != IBV_WQT_RQ) return fail(EINVAL);
  if ((attr->comp_mask & IBV_WQ_INIT_ATTR_FLAGS) && attr->create_flags) {
    // CVLAN stripping and FCS scattering are properties of the frame path,
    // asked of the QP (IBV_QP_CREATE_*); padding and delay-drop have no
    // meaning here.
    return fail(attr->create_flags & ~static_cast<uint32_t>(IBV_WQ_FLAGS_RESERVED - 1) ? EINVAL : EOPNOTSUPP);
  }
  if (!attr->pd || !attr->cq || attr->pd->context != ctx->ibv() || attr->cq->context != ctx->ibv() ||
      attr->max_wr == 0 || attr->max_wr > device_profile().max_qp_wr || attr->max_sge == 0 ||
      attr->max_sge > device_profile().max_sge)
    return fail(EINVAL);
  auto* wq = new Wq();
  wq->ctx = ctx;
  wq->pd_obj = Pd::from(attr->pd);
  wq->cq_obj = Cq::from(attr->cq);
  if (int e = wq->rq.init(ctx->host->arena(), attr->max_wr, attr->max_sge, false, wq->pd_obj->id, ctx->index)) {
    delete wq;
    return fail(e);
  }
  wq->max_sge = attr->max_sge;
  attr->max_wr = wq->rq.capacity();  // written back: >= what was asked
  wq->context = ctx->ibv();
  wq->wq_context = attr->wq_context;
  wq->pd = attr->pd;
  wq->cq = attr->cq;
  wq->wq_num = g_wq_num.fetch_add(1);
  wq->handle = wq->wq_num;
  wq->state = IBV_WQS_RESET;
  wq->wq_type = IBV_WQT_RQ;
  wq->post_recv = post_wq_recv;
  wq->comp_mask = 0;
  pthread_mutex_init(&wq->mutex, nullptr);
  pthread_cond_init(&wq->cond, nullptr);
  wq->pd_obj->users().fetch_add(1);
  wq->cq_obj->users.fetch_add(1);
  return wq;
}

int modify_wq(Wq* wq, const ibv_wq_attr& attr) {
  if (attr.attr_mask & ~static_cast<uint32_t>(IBV_WQ_ATTR_STATE | IBV_WQ_ATTR_CURR_STATE | IBV_WQ_ATTR_FLAGS))
    return EINVAL;
  if ((attr.attr_mask & IBV_WQ_ATTR_CURR_STATE) && attr.curr_wq_state != wq->state) return EINVAL;
  if ((attr.attr_mask & IBV_WQ_ATTR_FLAGS) && (attr.flags_mask & attr.flags)) return EOPNOTSUPP;
  if (!(attr.attr_mask & IBV_WQ_ATTR_STATE)) return 0;
  // RESET -> RDY -> ERR, and back to RESET from anywhere (as mlx5).
  const ibv_wq_state to = attr.wq_state;
  if (to != IBV_WQS_RESET && to != IBV_WQS_RDY && to != IBV_WQS_ERR) return EINVAL;
  if (to == IBV_WQS_RESET) wq->rq.discard_all();
  wq->state = to;
  return 0;
}

int destroy_wq(Wq* wq) {
  if (wq->tables.load() != 0) return EBUSY;
  wq->rq.release(wq->ctx->host->arena());
  wq->pd_obj->users().fetch_sub(1);
  wq->cq_obj->users.fetch_sub(1);
  delete wq;
  return 0;
}

RwqIndTable* create_rwq_ind_table(Context* ctx, const ibv_rwq_ind_table_init_attr& attr) {
  if (attr.comp_mask || attr.log_ind_tbl_size > 16 || !attr.ind_tbl) {
    errno = EINVAL;
    return nullptr;
  }
  const size_t n = size_t{1} << attr.log_ind_tbl_size;
  for (size_t i = 0; i < n; ++i) {
    if (!attr.ind_tbl[i] || attr.ind_tbl[i]->context != ctx->ibv()) {
      errno = EINVAL;
      return nullptr;
    }
  }
  auto* t = new RwqIndTable();
  t->ctx = ctx;
  t->context = ctx->ibv();
  for (size_t i = 0; i < n; ++i) {
    t->wqs.push_back(Wq::from(attr.ind_tbl[i]));
    t->wqs.back()->tables.fetch_add(1);
  }
  t->ind_tbl_num = g_table_num.fetch_add(1);
  t->ind_tbl_handle = t->ind_tbl_num;
  t->comp_mask = 0;
  return t;
}

int destroy_rwq_ind_table(RwqIndTable* t) {
  if (t->qps.load() != 0) return EBUSY;
  for (Wq* wq : t->wqs) wq->tables.fetch_sub(1);
  delete t;
  return 0;
}

}  // namespace sv
