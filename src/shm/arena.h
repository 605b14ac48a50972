// This process's arena: one memfd, mapped whole, holding every table and
// queue that peers must reach. Peers map the same memfd (through
// /proc/<pid>/fd/<n>) once, and then reach any object by its offset.
//
// Layout: header | QP table | MR table | SRQ table | doorbells | contexts |
// heap (queues, object blocks) | overlay region (pages that back registered
// memory, see overlay.h). The file is sparse: untouched pages cost nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>

#include "shm/extent_allocator.h"
#include "shm/index_pool.h"
#include "shm/layout.h"
#include "shm/name_pool.h"
#include "util/private_heap.h"

namespace sv::shm {

// Where the overlay region of an arena of `size` bytes begins: the end of
// its tables and queues (what a peer maps of it at first).
uint64_t overlay_begin_for(uint64_t size);

class Arena : public PrivateHeapObject {
 public:
  // Creates the memfd and lays out the tables. nullptr (errno set) on failure.
  static Arena* create(uint64_t size);

  int fd() const { return fd_; }
  uint64_t inode() const { return ino_; }
  uint64_t size() const { return size_; }
  uint8_t* base() const { return base_; }
  ArenaHeader* header() const { return reinterpret_cast<ArenaHeader*>(base_); }

  template <typename T>
  T* at(uint64_t off) const { return reinterpret_cast<T*>(base_ + off); }
  uint64_t offset_of(const void* p) const { return static_cast<const uint8_t*>(p) - base_; }

  QpSlotEntry* qp_table() const { return at<QpSlotEntry>(header()->qp_table); }
  MrEntry* mr_table() const { return at<MrEntry>(header()->mr_table); }
  SrqSlotEntry* srq_table() const { return at<SrqSlotEntry>(header()->srq_table); }
  DoorbellEntry* doorbells() const { return at<DoorbellEntry>(header()->doorbells); }
  ContextShared* contexts() const { return at<ContextShared>(header()->contexts); }
  BounceShared* bounce() const { return at<BounceShared>(header()->bounce); }

  // Zeroed, 64-byte aligned block in the heap region; 0 when exhausted.
  uint64_t alloc(uint64_t bytes);
  void free(uint64_t off, uint64_t bytes);

  // At attach, once our slot is known: where QPNs, MR keys and SRQ numbers
  // are leased (shm/name_pool.h); only home blocks for a process of the
  // host service.
  void lease_names_from(RegistryHeader* registry, uint32_t slot, bool home_only) {
    std::lock_guard g(mu_);
    std::atomic<uint32_t>* leased = &registry->procs[slot].name_blocks;
    qp_names_.lease_from(registry->qpn_blocks, slot, home_only, leased);
    mr_names_.lease_from(registry->key_blocks, slot, home_only, leased);
    srq_names_.lease_from(registry->srqn_blocks, slot, home_only, leased);
  }

  // Owner-side allocation of table indices. The caller publishes the entry.
  // -1 when none is free; names_ran_out() then tells whether the host's
  // names of that kind ran out rather than this process's table.
  int64_t take_qp_index() { return locked_take(qp_names_); }
  int64_t take_mr_index() { return locked_take(mr_names_); }
  int64_t take_srq_index() { return locked_take(srq_names_); }
  int64_t take_doorbell_index() { return locked_take(doorbell_ids_); }
  int64_t take_context_index() { return locked_take(context_ids_); }
  bool qp_names_ran_out() { return locked_ran_out(qp_names_); }
  bool mr_names_ran_out() { return locked_ran_out(mr_names_); }
  bool srq_names_ran_out() { return locked_ran_out(srq_names_); }
  // The names of indices the takes above handed out. (The blocks of
  // handed-out indices never change: read without the lock.)
  uint32_t qpn_of(uint32_t index) const { return qp_names_.name_of(index); }
  uint32_t srqn_of(uint32_t index) const { return srq_names_.name_of(index); }
  uint32_t key_of(uint32_t index) { return make_key(mr_names_.block_of(index), index, mr_rotation()); }
  void give_qp_index(uint32_t i) { locked_give(qp_names_, i); }
  void give_mr_index(uint32_t i) { locked_give(mr_names_, i); }
  void give_srq_index(uint32_t i) { locked_give(srq_names_, i); }
  void give_doorbell_index(uint32_t i) { locked_give(doorbell_ids_, i); }
  void give_context_index(uint32_t i) { locked_give(context_ids_, i); }
  // The low byte of a new memory key (key_of). Random, as rxe's are (a
  // random byte per key): another process that learned one of our keys
  // cannot tell the next ones from it (a fresh process's keys used to be
  // 0x..0101, 0x..0202, ...). A keyed mix of a counter threads share.
  uint32_t mr_rotation() {
    uint64_t z = mr_rotation_.fetch_add(1, std::memory_order_relaxed) * 0x9e3779b97f4a7c15ull + key_seed_;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return static_cast<uint32_t>(z ^ (z >> 31));
  }

  // Region for registered-memory overlays (page granular), owned by overlay.h.
  ExtentAllocator& overlay_space() { return overlay_space_; }
  std::mutex& overlay_mutex() { return overlay_mu_; }

  // Gives pages of [off, off+len) back to the kernel (punches a hole).
  void discard(uint64_t off, uint64_t len);

 private:
  Arena(int fd, uint64_t ino, uint8_t* base, uint64_t size);
  // (IndexPool or NamePool: the same take/give_back.)
  template <typename Pool>
  int64_t locked_take(Pool& p) {
    std::lock_guard g(mu_);
    return p.take();
  }
  template <typename Pool>
  void locked_give(Pool& p, uint32_t i) {
    std::lock_guard g(mu_);
    p.give_back(i);
  }
  bool locked_ran_out(NamePool& p) {
    std::lock_guard g(mu_);
    return p.names_ran_out();
  }

  int fd_;
  uint64_t ino_;
  uint8_t* base_;
  uint64_t size_;
  std::mutex mu_;
  ExtentAllocator heap_;
  NamePool qp_names_{0, kMulticastQpnBlock};
  NamePool mr_names_{1, 0};  // index 0 unused: read_mr and windows take it for none
  NamePool srq_names_{1, 0};
  IndexPool doorbell_ids_{0, kMaxDoorbells};
  IndexPool context_ids_{0, kMaxContexts};
  std::atomic<uint64_t> mr_rotation_{0};
  uint64_t key_seed_ = 0;  // from getrandom(), at creation
  std::mutex overlay_mu_;
  ExtentAllocator overlay_space_;
};

}  // namespace sv::shm
