// BriefSpinMutex: a waiter spins only while the holder may be running on
// another core; one on the holder's own core sleeps at once.
#include "util/brief_spin_mutex.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

namespace sv {
namespace {

uint64_t thread_cpu_ns() {
  timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return uint64_t(t.tv_sec) * 1'000'000'000 + uint64_t(t.tv_nsec);
}

void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof set, &set), 0);
}

// The CPU time a waiter spends in lock() while the holder, which took the
// lock on core `holder_cpu`, keeps it for 20 ms; the least of 5 tries (the
// machine's other load only adds).
template <typename Mutex>
uint64_t waiter_cpu_ns(int holder_cpu, int waiter_cpu) {
  uint64_t least = UINT64_MAX;
  for (int attempt = 0; attempt < 5; ++attempt) {
    Mutex mu;
    std::atomic<bool> held{false};
    std::thread holder([&] {
      pin_to(holder_cpu);
      std::lock_guard g(mu);
      held.store(true);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    });
    pin_to(waiter_cpu);
    while (!held.load()) std::this_thread::yield();
    const uint64_t before = thread_cpu_ns();
    mu.lock();
    const uint64_t spent = thread_cpu_ns() - before;
    mu.unlock();
    holder.join();
    least = std::min(least, spent);
  }
  return least;
}

TEST(BriefSpinMutex, AWaiterOnTheHoldersCoreSleepsAtOnce) {
  // Spinning there would burn its 20 us on the core the holder needs. It
  // costs what a waiter on a plain mutex pays to sleep and be woken (~10 us
  // of CPU time on these virtual machines), not 20 us more (30 us: what it
  // cost before the check, which this test failed).
  const uint64_t sleeping = waiter_cpu_ns<std::mutex>(0, 0), same_core = waiter_cpu_ns<BriefSpinMutex>(0, 0);
  EXPECT_LT(same_core, sleeping + 10'000) << "a plain mutex's waiter: " << sleeping << " ns";
}

TEST(BriefSpinMutex, ExcludesUnderContention) {
  BriefSpinMutex mu;
  long counter = 0;
  std::thread threads[4];
  for (auto& t : threads)
    t = std::thread([&] {
      for (int i = 0; i < 100'000; ++i) {
        std::lock_guard g(mu);
        ++counter;
      }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(counter, 400'000);
}

}  // namespace
}  // namespace sv
