#include "core/recv_queue.h"

#include <cerrno>
#include <algorithm>
#include <cstddef>
#include <cstring>

#include "util/bits.h"

namespace sv {
namespace {

uint32_t stride_for(uint32_t max_sge) {
  return static_cast<uint32_t>(align_up(sizeof(shm::RecvWqe) + sizeof(ibv_sge) * max_sge, 64));
}

// A WQE slot is written by the owner while a consumer may be reading it
// (only when another consumer already claimed it, and then the reader's CAS
// fails and it drops the copy). Both sides move its words atomically, so
// the race is benign by construction rather than undefined.
void store_words(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<uint64_t*>(dst);
  const auto* s = static_cast<const uint64_t*>(src);
  for (size_t i = 0; i < bytes / 8; ++i) std::atomic_ref<uint64_t>(d[i]).store(s[i], std::memory_order_relaxed);
}

void load_words(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<uint64_t*>(dst);
  auto* s = static_cast<uint64_t*>(const_cast<void*>(src));
  for (size_t i = 0; i < bytes / 8; ++i) d[i] = std::atomic_ref<uint64_t>(s[i]).load(std::memory_order_relaxed);
}

// The fields after seq, as one block of words: wr_id, num_sge, sge[].
constexpr size_t kWqeBody = offsetof(shm::RecvWqe, sge) - offsetof(shm::RecvWqe, wr_id);
static_assert(kWqeBody % 8 == 0 && sizeof(ibv_sge) % 8 == 0);

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
  int rc = 0;
  for (; wr; wr = wr->next) {
    if (wr->num_sge < 0 || static_cast<uint32_t>(wr->num_sge) > shared_->max_sge) {
      rc = EINVAL;
      break;
    }
    if (tail - cached_head_ >= shared_->capacity) {
      // What polling learnt first: reading head would take its line from
      // the peer that is claiming WQEs, every post when the application
      // keeps the ring full (perftest's ib_send_bw does).
      const uint64_t seen = shared_->seen.load(std::memory_order_acquire);
      if (seen > cached_head_ && seen <= tail) cached_head_ = seen;
    }
    if (tail - cached_head_ >= shared_->capacity) {
      cached_head_ = shared_->head.load(std::memory_order_acquire);
      if (tail - cached_head_ >= shared_->capacity) {
        rc = ENOMEM;
        break;
      }
    }
    auto* w = reinterpret_cast<shm::RecvWqe*>(ring_ + (tail & (shared_->capacity - 1)) * shared_->stride);
    struct {
      uint64_t wr_id;
      uint32_t num_sge, reserved;
    } head{wr->wr_id, static_cast<uint32_t>(wr->num_sge), 0};
    store_words(&w->wr_id, &head, kWqeBody);
    if (wr->num_sge) store_words(w->sge, wr->sg_list, sizeof(ibv_sge) * wr->num_sge);
    w->seq.store(tail + 1, std::memory_order_release);
    ++tail;
  }
  shared_->tail.store(tail, std::memory_order_release);
  if (rc) *bad = wr;
  return rc;
}

void RecvQueue::discard_all() {
  std::lock_guard g(post_mu_);
  shared_->head.store(shared_->tail.load(std::memory_order_acquire), std::memory_order_release);
}

void note_receive_taken(shm::RecvQueueShared* q, uint32_t rq_pos) {
  // rq_pos holds the low 32 bits of position + 1. The position is near
  // tail: at most a ring behind it, or just ahead when this thread has not
  // seen the poster's newest tail yet.
  const uint64_t tail = q->tail.load(std::memory_order_acquire);
  const uint64_t taken = tail + static_cast<int32_t>(rq_pos - static_cast<uint32_t>(tail));
  uint64_t seen = q->seen.load(std::memory_order_relaxed);
  while (taken > seen && !q->seen.compare_exchange_weak(seen, taken, std::memory_order_release,
                                                        std::memory_order_relaxed)) {
  }
}

namespace {

const shm::RecvWqe* slot_at(const shm::Peer& owner, const shm::RecvQueueShared* q, uint64_t pos) {
  return owner.at<shm::RecvWqe>(q->ring_off + (pos & (q->capacity - 1)) * q->stride);
}

// Copies the posted WQEs after `head` (up to kDepth in all, small ones only).
void read_ahead(const shm::Peer& owner, const shm::RecvQueueShared* q, uint64_t head, RecvAhead* ahead) {
  ahead->queue = q;
  ahead->owner_slot = owner.slot;
  ahead->owner_incarnation = owner.incarnation;
  ahead->first = head + 1;
  ahead->count = 0;
  for (uint32_t i = 0; i < RecvAhead::kDepth; ++i) {
    const shm::RecvWqe* w = slot_at(owner, q, head + 1 + i);
    if (!w || w->seq.load(std::memory_order_acquire) != head + 2 + i) return;
    RecvAhead::Entry& e = ahead->entries[i];
    load_words(&e.wr_id, &w->wr_id, kWqeBody);
    if (e.num_sge > RecvAhead::kMaxSge || e.num_sge > q->max_sge) return;
    if (e.num_sge) load_words(e.sge, w->sge, sizeof(ibv_sge) * e.num_sge);
    ++ahead->count;
  }
}

}  // namespace

bool take_recv_wqe(const shm::Peer& owner, shm::RecvQueueShared* q, RecvWqeCopy* out, RecvAhead* ahead) {
  if (q->capacity == 0) return false;
  uint64_t head = q->head.load(std::memory_order_acquire);
  if (ahead && ahead->queue == q && ahead->owner_slot == owner.slot &&
      ahead->owner_incarnation == owner.incarnation && head - ahead->first < ahead->count) {
    const RecvAhead::Entry& e = ahead->entries[head - ahead->first];
    if (q->head.compare_exchange_strong(head, head + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      out->pos = head;
      out->wr_id = e.wr_id;
      out->num_sge = e.num_sge;
      std::copy_n(e.sge, e.num_sge, out->sge);
      return true;
    }
    ahead->count = 0;  // another consumer took it: the copies are stale
  }
  for (;;) {
    const shm::RecvWqe* w = slot_at(owner, q, head);
    if (!w || w->seq.load(std::memory_order_acquire) != head + 1) return false;  // nothing posted at head
    load_words(&out->wr_id, &w->wr_id, kWqeBody);
    out->num_sge = std::min(out->num_sge, q->max_sge);
    if (out->num_sge) load_words(out->sge, w->sge, sizeof(ibv_sge) * out->num_sge);
    // Claim it. On failure another consumer took it first: head now says
    // where to look next.
    if (q->head.compare_exchange_weak(head, head + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
      out->pos = head;
      if (ahead) read_ahead(owner, q, head, ahead);
      return true;
    }
  }
}

}  // namespace sv
