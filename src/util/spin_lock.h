// A small lock for this process's own queues (send queue, posting, polling).
// Uncontended it costs one CAS and one store, where a pthread mutex costs
// two locked instructions plus bookkeeping; contended, it yields the CPU
// after a short spin rather than burning it.
#pragma once

#include <sched.h>

#include <atomic>

#include "util/bits.h"

namespace sv {

class SpinLock {
 public:
  void lock() {
    for (unsigned spins = 0;; ++spins) {
      if (!locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire)) return;
      if (spins < 128)
        cpu_relax();
      else
        sched_yield();
    }
  }
  bool try_lock() { return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire); }
  void unlock() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

}  // namespace sv
