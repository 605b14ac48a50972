#include "core/recv_queue.h"

#include <cerrno>
#include <cstring>

#include "shm/robust_mutex.h"
#include "util/bits.h"

namespace sv {
namespace {

uint32_t stride_for(uint32_t max_sge) {
  return static_cast<uint32_t>(align_up(sizeof(shm::RecvWqe) + sizeof(ibv_sge) * max_sge, 64));
}

}  // namespace

int RecvQueue::init(shm::Arena& arena, uint32_t max_wr, uint32_t max_sge, bool is_srq, uint32_t pd,
                    uint32_t ctx_index) {
  arena_ = &arena;
  uint32_t cap = max_wr ? static_cast<uint32_t>(round_up_pow2(max_wr)) : 0;
  uint32_t stride = stride_for(max_sge);
  shared_off_ = arena.alloc(sizeof(shm::RecvQueueShared));
  if (!shared_off_) return ENOMEM;
  uint64_t ring_off = cap ? arena.alloc(uint64_t{cap} * stride) : 0;
  if (cap && !ring_off) {
    arena.free(shared_off_, sizeof(shm::RecvQueueShared));
    shared_off_ = 0;
    return ENOMEM;
  }
  shared_ = arena.at<shm::RecvQueueShared>(shared_off_);
  shared_->capacity = cap;
  shared_->max_sge = max_sge;
  shared_->stride = stride;
  shared_->is_srq = is_srq;
  shared_->ring_off = ring_off;
  shared_->pd = pd;
  shared_->ctx_index = ctx_index;
  shm::robust_mutex_init(&shared_->consume_lock);
  ring_ = ring_off ? arena.at<uint8_t>(ring_off) : nullptr;
  return 0;
}

void RecvQueue::release(shm::Arena& arena) {
  if (!shared_) return;
  if (shared_->ring_off) arena.free(shared_->ring_off, uint64_t{shared_->capacity} * shared_->stride);
  arena.free(shared_off_, sizeof(shm::RecvQueueShared));
  shared_ = nullptr;
}

uint32_t RecvQueue::outstanding() const {
  return static_cast<uint32_t>(shared_->tail.load(std::memory_order_acquire) -
                               shared_->head.load(std::memory_order_acquire));
}

int RecvQueue::post(ibv_recv_wr* wr, ibv_recv_wr** bad) {
  std::lock_guard g(post_mu_);
  uint64_t tail = shared_->tail.load(std::memory_order_relaxed);
  for (; wr; wr = wr->next) {
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > shared_->max_sge) {
      *bad = wr;
      shared_->tail.store(tail, std::memory_order_release);
      return EINVAL;
    }
    if (tail - shared_->head.load(std::memory_order_acquire) >= shared_->capacity) {
      *bad = wr;
      shared_->tail.store(tail, std::memory_order_release);
      return ENOMEM;
    }
    auto* w = reinterpret_cast<shm::RecvWqe*>(ring_ + (tail & (shared_->capacity - 1)) * shared_->stride);
    w->wr_id = wr->wr_id;
    w->num_sge = static_cast<uint32_t>(wr->num_sge);
    if (wr->num_sge) std::memcpy(w->sge, wr->sg_list, sizeof(ibv_sge) * wr->num_sge);
    ++tail;
  }
  shared_->tail.store(tail, std::memory_order_release);
  return 0;
}

shm::RecvQueueShared* peer_recv_queue(const shm::Peer& owner, uint64_t off) {
  auto* q = owner.at<shm::RecvQueueShared>(off);
  if (!q || q->max_sge > limits::kMaxSge) return nullptr;
  if (q->capacity && !owner.contains(q->ring_off, uint64_t{q->capacity} * q->stride)) return nullptr;
  return q;
}

bool take_recv_wqe(const shm::Peer& owner, shm::RecvQueueShared* q, RecvWqeCopy* out, uint64_t* left) {
  shm::RobustLock lock(&q->consume_lock);
  uint64_t head = q->head.load(std::memory_order_relaxed);
  uint64_t tail = q->tail.load(std::memory_order_acquire);
  if (head == tail || q->capacity == 0) return false;
  const auto* w = owner.at<shm::RecvWqe>(q->ring_off + (head & (q->capacity - 1)) * q->stride);
  if (!w) return false;
  out->wr_id = w->wr_id;
  out->num_sge = w->num_sge > q->max_sge ? q->max_sge : w->num_sge;
  std::memcpy(out->sge, w->sge, sizeof(ibv_sge) * out->num_sge);
  q->head.store(head + 1, std::memory_order_release);
  if (left) *left = tail - head - 1;
  return true;
}

}  // namespace sv
