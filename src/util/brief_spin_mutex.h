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
// built) costs the waiter no more than that; and a waiter on the core where
// the holder took the lock does not spin at all (below).
#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "util/bits.h"
#include "util/clock.h"

namespace sv {

class BriefSpinMutex {
 public:
  void lock() {
    if (m_.try_lock()) return took();
    const uint64_t until = monotonic_ns() + kSpinNs;
    do {
      // Spinning pays only while the holder runs on another core. One that
      // was preempted on ours (a polling application, by its network
      // thread woken on its core) runs again only once we sleep: the
      // network thread spun its whole kSpinNs on rx_mu for it, ~13% of a
      // core in an MPI ping-pong between two hosts (perf: the spin loop
      // inlined in network_thread).
      if (holder_cpu_.load(std::memory_order_relaxed) == sched_getcpu()) break;
      for (int i = 0; i < 32; ++i) cpu_relax();
      if (m_.try_lock()) return took();
    } while (monotonic_ns() < until);
    m_.lock();
    took();
  }
  bool try_lock() {
    if (!m_.try_lock()) return false;
    took();
    return true;
  }
  void unlock() { m_.unlock(); }

 private:
  static constexpr uint64_t kSpinNs = 20'000;
  // Where the holder ran when it took the lock (sched_getcpu reads the
  // kernel's rseq area: a load).
  void took() { holder_cpu_.store(sched_getcpu(), std::memory_order_relaxed); }
  std::mutex m_;
  std::atomic<int> holder_cpu_{-1};
};

}  // namespace sv
