#include "core/async_events.h"

#include <unistd.h>

#include <cerrno>

#include "core/cq.h"
#include "core/qp.h"
#include "core/srq.h"
#include "shm/robust_mutex.h"
#include "util/log.h"

namespace sv {
namespace {

bool append(shm::ContextShared* cs, ibv_event_type type, uint32_t kind, uint32_t id) {
  shm::RobustLock lock(&cs->lock);
  uint64_t t = cs->tail.load(std::memory_order_relaxed);
  if (t - cs->head.load(std::memory_order_acquire) >= shm::kAsyncRingSize) {
    cs->dropped.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  cs->ring[t % shm::kAsyncRingSize] = shm::AsyncRecord{static_cast<uint32_t>(type), kind, id, 0};
  cs->tail.store(t + 1, std::memory_order_release);
  return true;
}

// Bumps the per-object count of events handed out, which destroy waits on.
void count_reported(pthread_mutex_t* mutex, uint32_t* counter) {
  pthread_mutex_lock(mutex);
  ++*counter;
  pthread_mutex_unlock(mutex);
}

// Turns a record into an event; false when its object no longer exists.
bool translate(Context* ctx, const shm::AsyncRecord& r, ibv_async_event* ev) {
  ev->event_type = static_cast<ibv_event_type>(r.event_type);
  switch (r.kind) {
    case shm::kAsyncQp: {
      Qp* qp = ctx->qp_by_num(r.id);
      if (!qp) return false;
      count_reported(&qp->qp_base.mutex, &qp->async_reported);
      ev->element.qp = qp->ibv();
      return true;
    }
    case shm::kAsyncCq: {
      Cq* cq = ctx->cq_by_id(r.id);
      if (!cq) return false;
      count_reported(&cq->mutex, &cq->async_reported);
      ev->element.cq = cq->ibv();
      return true;
    }
    case shm::kAsyncSrq: {
      Srq* srq = ctx->srq_by_num(r.id);
      if (!srq) return false;
      count_reported(&srq->mutex, &srq->async_reported);
      ev->element.srq = srq;
      return true;
    }
    case shm::kAsyncPort:
      ev->element.port_num = static_cast<int>(r.id);
      return true;
    default:
      ev->element.port_num = 0;
      return true;
  }
}

}  // namespace

bool raise_async(shm::PeerTable& peers, const shm::Peer& owner, uint32_t ctx_index, ibv_event_type type,
                 uint32_t kind, uint32_t id) {
  if (ctx_index >= shm::kMaxContexts) return false;
  auto* cs = owner.at<shm::ContextShared>(owner.header()->contexts + ctx_index * sizeof(shm::ContextShared));
  if (!cs || !cs->in_use.load(std::memory_order_acquire)) return false;
  if (!append(cs, type, kind, id)) return false;
  peers.ring_doorbell(owner, cs->doorbell, cs->doorbell_gen);
  return true;
}

void raise_async_local(Context* ctx, ibv_event_type type, uint32_t kind, uint32_t id) {
  SV_DEBUG("async event %s on object %u", ibv_event_type_str(type), id);
  if (append(ctx->shared, type, kind, id)) ctx->async_bell.ring();
}

int get_async_event(Context* ctx, ibv_async_event* event) {
  shm::ContextShared* cs = ctx->shared;
  for (;;) {
    {
      std::lock_guard g(ctx->async_mu);
      ctx->async_bell.drain();  // before reading the ring: see get_cq_event
      uint64_t h = cs->head.load(std::memory_order_relaxed);
      while (h != cs->tail.load(std::memory_order_acquire)) {
        shm::AsyncRecord r = cs->ring[h % shm::kAsyncRingSize];
        cs->head.store(++h, std::memory_order_release);
        if (translate(ctx, r, event)) {
          if (h != cs->tail.load(std::memory_order_acquire)) ctx->async_bell.ring();
          return 0;
        }
      }
    }
    char buf[64];
    if (::read(ctx->context.async_fd, buf, sizeof buf) < 0) return -1;
  }
}

void ack_async_event(ibv_async_event* ev) {
  auto bump = [](auto* obj, uint32_t* counter) {
    pthread_mutex_lock(&obj->mutex);
    ++*counter;
    pthread_cond_broadcast(&obj->cond);
    pthread_mutex_unlock(&obj->mutex);
  };
  switch (ev->event_type) {
    case IBV_EVENT_CQ_ERR:
      bump(ev->element.cq, &ev->element.cq->async_events_completed);
      break;
    case IBV_EVENT_QP_FATAL:
    case IBV_EVENT_QP_REQ_ERR:
    case IBV_EVENT_QP_ACCESS_ERR:
    case IBV_EVENT_COMM_EST:
    case IBV_EVENT_SQ_DRAINED:
    case IBV_EVENT_PATH_MIG:
    case IBV_EVENT_PATH_MIG_ERR:
    case IBV_EVENT_QP_LAST_WQE_REACHED:
      bump(ev->element.qp, &ev->element.qp->events_completed);
      break;
    case IBV_EVENT_SRQ_ERR:
    case IBV_EVENT_SRQ_LIMIT_REACHED:
      bump(ev->element.srq, &ev->element.srq->events_completed);
      break;
    default:
      break;
  }
}

}  // namespace sv
