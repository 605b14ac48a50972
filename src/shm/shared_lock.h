// A lock in shared memory, taken by processes that produce into another
// process's queue. The word names its holder (registry slot and
// incarnation), so a waiter that finds the holder dead — liveness from the
// registry, not a pid — takes the lock over and repairs what the dead holder
// left half done (the caller knows what that means for its queue).
// Uncontended: one CAS to take it, one store to release it.
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>

#include "shm/layout.h"
#include "util/bits.h"

namespace sv::shm {

// Identifies this process as a lock holder: slot in the high 13 bits, the
// low 19 bits of its incarnation below. Never 0.
static_assert(kMaxProcs <= 1u << 13);
inline constexpr uint32_t kHolderIncarnationMask = 0x7ffff;
inline uint32_t lock_owner_id(uint32_t slot, uint32_t incarnation) {
  return slot << 19 | (incarnation & kHolderIncarnationMask);
}
inline uint32_t lock_owner_slot(uint32_t word) { return word >> 19; }
inline bool lock_owner_is(uint32_t word, uint32_t incarnation) {
  return (word & kHolderIncarnationMask) == (incarnation & kHolderIncarnationMask);
}

inline bool lock_holder_dead(const RegistryHeader& reg, uint32_t word) {
  if (lock_owner_slot(word) >= kMaxProcs) return true;  // (no process's word)
  const ProcSlot& p = reg.procs[lock_owner_slot(word)];
  return !proc_alive(p) || !lock_owner_is(word, p.incarnation.load(std::memory_order_acquire));
}

class SharedLockGuard {
 public:
  // Returns with the lock held. `stolen()` tells whether it was taken over
  // from a dead holder.
  SharedLockGuard(std::atomic<uint32_t>& word, uint32_t me, const RegistryHeader& reg) : word_(word) {
    for (unsigned spins = 1;; ++spins) {
      uint32_t w = word_.load(std::memory_order_relaxed);
      if (w == 0 && word_.compare_exchange_weak(w, me, std::memory_order_acquire)) return;
      if (w != 0 && spins % 256 == 0 && lock_holder_dead(reg, w) &&
          word_.compare_exchange_strong(w, me, std::memory_order_acquire)) {
        stolen_ = true;
        return;
      }
      if (spins < 1024)
        cpu_relax();
      else
        sched_yield();
    }
  }
  ~SharedLockGuard() { word_.store(0, std::memory_order_release); }
  SharedLockGuard(const SharedLockGuard&) = delete;
  SharedLockGuard& operator=(const SharedLockGuard&) = delete;
  bool stolen() const { return stolen_; }

 private:
  std::atomic<uint32_t>& word_;
  bool stolen_ = false;
};

}  // namespace sv::shm
