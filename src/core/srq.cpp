#include "core/srq.h"

#include <cerrno>

#include "core/cq.h"
#include "core/device_profile.h"
#include "core/faults.h"
#include "core/limits.h"
#include "core/limit_reached.h"
#include "core/object_budget.h"
#include "core/xrcd.h"

namespace sv {

namespace {
ObjectBudget g_srq_budget;  // SRQs of the process (max_srq is the profile's)
}  // namespace


Srq* create_srq(Pd* pd, ibv_srq_init_attr* attr, Xrcd* xrcd, Cq* cq) {
  if (int e = faults::call(faults::Call::kCreateSrq)) {
    errno = e;
    return nullptr;
  }
  ibv_srq_attr& a = attr->attr;
  if (a.max_wr == 0 || a.max_wr > device_profile().max_srq_wr || a.max_sge == 0 ||
      a.max_sge > device_profile().max_srq_sge ||
      a.srq_limit > a.max_wr) {
    errno = EINVAL;
    return nullptr;
  }
  Context* ctx = pd->ctx;
  if (!g_srq_budget.take(device_profile().max_srq)) {
    limit_reached(Limit::kSrqs, device_profile().max_srq);
    errno = ENOMEM;  // (the profile's max_srq)
    return nullptr;
  }
  shm::Arena& arena = ctx->host->arena();
  int64_t idx = arena.take_srq_index();
  if (idx < 0) {
    g_srq_budget.give();
    name_limit_reached(arena.srq_names_ran_out(), Limit::kSrqs, limits::kMaxSrq);
    errno = ENOMEM;
    return nullptr;
  }
  auto* srq = new Srq();
  srq->ctx = ctx;
  srq->pd_obj = pd;
  srq->index = static_cast<uint32_t>(idx);
  srq->srqn = arena.srqn_of(srq->index);
  if (int e = srq->rq.init(arena, a.max_wr, a.max_sge, true, pd->id, ctx->index)) {
    arena.give_srq_index(srq->index);
    g_srq_budget.give();
    delete srq;
    errno = e;
    return nullptr;
  }
  srq->rq.shared()->srqn = srq->srqn;
  if (xrcd) {
    srq->xrcd = xrcd;
    srq->cq = cq;
    srq->rq.shared()->xrcd_id = xrcd->id;
    srq->rq.shared()->cq_off = cq->shared_off;
    xrcd->users.fetch_add(1);
    cq->users.fetch_add(1);
  }
  srq->rq.shared()->limit.store(a.srq_limit, std::memory_order_release);
  srq->max_wr = srq->rq.capacity();
  srq->max_sge = a.max_sge;
  a.max_wr = srq->max_wr;
  shm::SrqSlotEntry& e = arena.srq_table()[srq->index];
  e.shared_off.store(srq->rq.shared_off(), std::memory_order_relaxed);
  e.srqn.store(srq->srqn, std::memory_order_release);

  srq->context = ctx->ibv();
  srq->srq_context = attr->srq_context;
  srq->pd = pd;
  srq->handle = srq->srqn;
  pthread_mutex_init(&srq->mutex, nullptr);
  pthread_cond_init(&srq->cond, nullptr);
  pd->users().fetch_add(1);
  {
    std::lock_guard g(ctx->objects_mu);
    ctx->srqs[srq->srqn] = srq;
  }
  return srq;
}

int modify_srq(Srq* srq, ibv_srq_attr* attr, int mask) {
  if (mask & ~(IBV_SRQ_MAX_WR | IBV_SRQ_LIMIT)) return EINVAL;
  // Resizing an SRQ is not supported (the device does not claim
  // IBV_DEVICE_SRQ_RESIZE for growing a live ring): it is refused.
  if (mask & IBV_SRQ_MAX_WR) return EOPNOTSUPP;
  if (mask & IBV_SRQ_LIMIT) {
    if (attr->srq_limit > srq->max_wr) return EINVAL;
    srq->rq.shared()->limit.store(attr->srq_limit, std::memory_order_release);
  }
  return 0;
}

int query_srq(Srq* srq, ibv_srq_attr* attr) {
  attr->max_wr = srq->max_wr;
  attr->max_sge = srq->max_sge;
  attr->srq_limit = srq->rq.shared()->limit.load(std::memory_order_acquire);
  return 0;
}

int destroy_srq(Srq* srq) {
  if (srq->users.load() != 0) return EBUSY;
  Context* ctx = srq->ctx;
  {
    std::lock_guard g(ctx->objects_mu);
    ctx->srqs.erase(srq->srqn);
  }
  pthread_mutex_lock(&srq->mutex);
  while (srq->events_completed != srq->async_reported) pthread_cond_wait(&srq->cond, &srq->mutex);
  pthread_mutex_unlock(&srq->mutex);
  shm::Arena& arena = ctx->host->arena();
  arena.srq_table()[srq->index].srqn.store(0, std::memory_order_release);
  srq->rq.release(arena);
  arena.give_srq_index(srq->index);
  srq->pd_obj->users().fetch_sub(1);
  if (srq->xrcd) {
    srq->xrcd->users.fetch_sub(1);
    srq->cq->users.fetch_sub(1);
  }
  g_srq_budget.give();
  delete srq;
  return 0;
}

int post_srq_recv(Srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) { return srq->rq.post(wr, bad); }

}  // namespace sv
