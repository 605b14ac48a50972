// Receive queues, of a QP or shared (SRQ). The owner posts WQEs into a ring
// in its arena; whoever delivers a message (a peer, or the owner flushing)
// takes the oldest one with a CAS on the ring's head (shm/layout.h).
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <mutex>

#include "core/limits.h"
#include "shm/arena.h"
#include "shm/layout.h"
#include "shm/peers.h"
#include "util/spin_lock.h"

namespace sv {

// A WQE taken from a receive queue, copied out of shared memory.
struct RecvWqeCopy {
  uint64_t wr_id;
  uint32_t num_sge;
  uint32_t reserved;  // mirrors shm::RecvWqe, which is copied in one block
  ibv_sge sge[limits::kMaxSge];
  uint64_t pos;  // the ring position it was taken from
};

class RecvQueue {
 public:
  // Allocates the ring: capacity = max_wr rounded up to a power of two.
  int init(shm::Arena& arena, uint32_t max_wr, uint32_t max_sge, bool is_srq, uint32_t pd, uint32_t ctx_index);
  void release(shm::Arena& arena);

  // ibv_post_recv / ibv_post_srq_recv: EINVAL (too many SGEs), ENOMEM (full).
  int post(ibv_recv_wr* wr, ibv_recv_wr** bad);
  // Drops every posted WQE without completions (a QP moving to RESET).
  void discard_all();
  // WQEs posted and not yet taken.
  uint32_t outstanding() const;

  uint32_t capacity() const { return shared_ ? shared_->capacity : 0; }
  uint32_t max_sge() const { return shared_ ? shared_->max_sge : 0; }
  uint64_t shared_off() const { return shared_off_; }
  shm::RecvQueueShared* shared() const { return shared_; }

 private:
  shm::Arena* arena_ = nullptr;
  uint64_t shared_off_ = 0;
  shm::RecvQueueShared* shared_ = nullptr;
  uint8_t* ring_ = nullptr;
  // A position head is known to have passed: head as last read, or what
  // polled completions said (RecvQueueShared::seen). Head is read only when
  // neither leaves room.
  uint64_t cached_head_ = 0;
  SpinLock post_mu_;
};

// An initiator's read-ahead of the receive queue it delivers to, as a NIC
// prefetches receive WQEs: one pass reads the next few posted WQEs (lines
// the receiver wrote long ago, so each read is a cache miss) and later
// messages use the copies. A copy of position p stays valid until p is
// claimed: the owner cannot post into slot p again before head passes it.
// Claiming is still one CAS on head. Used by connected QPs (one target).
struct RecvAhead {
  static constexpr uint32_t kDepth = 8;
  static constexpr uint32_t kMaxSge = 4;  // WQEs with more SGEs are read directly
  struct Entry {
    uint64_t wr_id;
    uint32_t num_sge;
    uint32_t reserved;
    ibv_sge sge[kMaxSge];
  };
  // Which queue the copies are of: a mapping address can be reused once a
  // peer is gone, so its owner's registry slot and incarnation count too.
  const shm::RecvQueueShared* queue = nullptr;
  uint32_t owner_slot = 0, owner_incarnation = 0;
  uint64_t first = 0;  // ring position of entries[0]
  uint32_t count = 0;
  Entry entries[kDepth];
};

// Takes the oldest WQE of the queue at `q` in `owner`'s arena. False if empty.
// `ahead` (optional) is the caller's read-ahead of this queue.
bool take_recv_wqe(const shm::Peer& owner, shm::RecvQueueShared* q, RecvWqeCopy* out, RecvAhead* ahead = nullptr);

// The owner's poller saw the completion of a receive a peer took from `q`:
// `rq_pos` is CqeFields::rq_pos. Raises q->seen to that position.
void note_receive_taken(shm::RecvQueueShared* q, uint32_t rq_pos);

// The receive queue of `owner` at arena offset `off`, or nullptr if implausible.
inline shm::RecvQueueShared* peer_recv_queue(const shm::Peer& owner, uint64_t off) {
  auto* q = owner.at<shm::RecvQueueShared>(off);
  if (!q || q->max_sge > limits::kMaxSge) return nullptr;
  if (q->capacity && !owner.contains(q->ring_off, uint64_t{q->capacity} * q->stride)) return nullptr;
  return q;
}

}  // namespace sv
