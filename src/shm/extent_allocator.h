// First-fit allocator of [offset, offset+size) ranges inside a region of the
// arena. Owner-only (callers serialize). Freed ranges are quarantined for a
// while before reuse: a peer that looked an object up just before it was
// destroyed may still touch it, and must then touch dead memory rather than
// a new object that happens to reuse the bytes.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include "util/private_heap.h"

namespace sv::shm {

class ExtentAllocator {
 public:
  ExtentAllocator(uint64_t begin, uint64_t end, uint64_t granule, uint64_t quarantine_ns);

  // Returns the offset of a free range of at least `size` bytes, or 0.
  uint64_t allocate(uint64_t size);
  // Returns a range; it becomes reusable after the quarantine.
  void release(uint64_t offset, uint64_t size, uint64_t now_ns);
  // Ranges whose quarantine ended before `now_ns` join the free list. Returns
  // them so the caller can give their pages back to the kernel.
  template <typename Fn>
  void reclaim(uint64_t now_ns, Fn&& on_reclaimed) {
    while (!quarantine_.empty() && quarantine_.front().until_ns <= now_ns) {
      Held h = quarantine_.front();
      quarantine_.pop_front();
      on_reclaimed(h.offset, h.size);
      insert_free(h.offset, h.size);
    }
  }

  uint64_t granule() const { return granule_; }
  uint64_t bytes_in_use() const { return in_use_; }

 private:
  struct Held {
    uint64_t offset, size, until_ns;
  };
  void insert_free(uint64_t offset, uint64_t size);

  uint64_t granule_;
  uint64_t quarantine_ns_;
  uint64_t in_use_ = 0;
  PrivateMap<uint64_t, uint64_t> free_;  // offset -> size, coalesced
  PrivateDeque<Held> quarantine_;        // in release order
};

}  // namespace sv::shm
