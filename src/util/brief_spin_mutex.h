// A mutex whose waiter spins for a few microseconds before it sleeps.
//
// The RoCEv2 engine's locks are held for a few microseconds at a time (a
// packet handled, a sendmmsg), by the network thread on one core and an
// application thread on another. A waiter that sleeps at once on the futex
// costs two context switches, its own and the holder's wake-up call, each
// several microseconds on a virtual machine: they made up most of the
// round trip of a ping-pong between two hosts (perf sched showed more
// futex sleeps than packets). Spinning stops after kSpinNs, so a holder
// that was preempted or holds the lock long (a window of packets being
// built) costs the waiter no more than that.
#pragma once

#include <cstdint>
#include <mutex>

#include "util/bits.h"
#include "util/clock.h"

namespace sv {

class BriefSpinMutex {
 public:
  void lock() {
    if (m_.try_lock()) return;
    const uint64_t until = monotonic_ns() + kSpinNs;
    do {
      for (int i = 0; i < 32; ++i) cpu_relax();
      if (m_.try_lock()) return;
    } while (monotonic_ns() < until);
    m_.lock();
  }
  bool try_lock() { return m_.try_lock(); }
  void unlock() { m_.unlock(); }

 private:
  static constexpr uint64_t kSpinNs = 20'000;
  std::mutex m_;
};

}  // namespace sv
