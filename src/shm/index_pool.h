// Hands out small integer indices (QP, MR, SRQ, doorbell, context slots)
// round-robin, so that a freed index is reused as late as possible: a peer
// holding a stale number then finds nothing rather than a new object.
#pragma once

#include <cstdint>
#include <vector>
#include "util/private_heap.h"

namespace sv::shm {

class IndexPool {
 public:
  IndexPool(uint32_t first, uint32_t limit) : first_(first), next_(first), used_(limit, false) {}

  // Returns a free index in [first, limit), or -1 when all are in use.
  int64_t take() {
    const uint32_t limit = static_cast<uint32_t>(used_.size());
    for (uint32_t n = 0; n < limit - first_; ++n) {
      uint32_t i = next_;
      next_ = next_ + 1 >= limit ? first_ : next_ + 1;
      if (!used_[i]) {
        used_[i] = true;
        ++count_;
        return i;
      }
    }
    return -1;
  }
  void give_back(uint32_t i) {
    if (i < used_.size() && used_[i]) {
      used_[i] = false;
      --count_;
    }
  }
  // Takes `i` out of circulation for good: a number that must never name
  // an object (the multicast QPN).
  void withhold(uint32_t i) {
    if (i < used_.size()) used_[i] = true;
  }
  uint32_t count() const { return count_; }

 private:
  uint32_t first_;
  uint32_t next_;
  uint32_t count_ = 0;
  PrivateVector<bool> used_;
};

}  // namespace sv::shm
