// Turns a hung test into a failure that says where it hung.
//
// CTest kills a test that outlives its TIMEOUT and keeps nothing but the
// output so far: a "[ RUN ]" line. A test that hangs once in hundreds of
// runs (in CI, never locally) is then all but impossible to chase. This
// listener, linked into each gtest binary, arms a deadline when a test
// starts; if the test is still running when it passes, it prints every
// thread's kernel wait channel and stack (gdb's, when installed:
// tests/common/process_stacks.h) and aborts, well inside CTest's limit.
//
// The deadline: SOFTVERBS_TEST_HANG_S seconds (0 turns the watchdog off),
// else SOFTVERBS_TEST_HANG_DEFAULT_S, which each binary's CMakeLists sets
// below its CTest TIMEOUT.
#include <gtest/gtest.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <new>

#include "process_stacks.h"

namespace {

int hang_seconds() {
  if (const char* v = std::getenv("SOFTVERBS_TEST_HANG_S")) return std::atoi(v);
  return SOFTVERBS_TEST_HANG_DEFAULT_S;
}

// The deadline and the thread that watches it. Never destroyed: gtest
// deletes its listeners at exit, and a condition variable must not be
// destroyed under the thread still waiting on it (glibc waits for it).
// It lives on a page of its own, not on the heap: tests register heap
// buffers, and registration copies the pages under them into shared memory
// (the overlay), which would race with this thread's use of its mutex.
// For the same reason the thread is a plain pthread (std::thread keeps its
// start state on the heap) and the test's name is not a std::string.
class Watch {
 public:
  static Watch* create(int seconds) {
    void* page = mmap(nullptr, sizeof(Watch), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return nullptr;
    auto* w = new (page) Watch(seconds);
    pthread_t t;
    if (pthread_create(&t, nullptr, &Watch::thread_main, w) != 0) return nullptr;
    pthread_detach(t);
    return w;
  }

  void start(const testing::TestInfo& info) {
    std::lock_guard g(mu_);
    std::snprintf(name_, sizeof name_, "%s.%s", info.test_suite_name(), info.name());
    deadline_ = std::chrono::steady_clock::now() + std::chrono::seconds(seconds_);
    running_ = true;
    cv_.notify_all();
  }
  void end() {
    std::lock_guard g(mu_);
    running_ = false;
    cv_.notify_all();
  }

 private:
  explicit Watch(int seconds) : seconds_(seconds) {}
  static void* thread_main(void* self) {
    static_cast<Watch*>(self)->run();
    return nullptr;
  }

  void run() {
    std::unique_lock g(mu_);
    for (;;) {
      cv_.wait(g, [this] { return running_; });
      const auto deadline = deadline_;
      if (cv_.wait_until(g, deadline, [&] { return !running_ || deadline_ != deadline; })) continue;
      std::fprintf(stderr, "\n*** %s still running after %d s (SOFTVERBS_TEST_HANG_S): the threads' stacks\n",
                   name_, seconds_);
      g.unlock();
      sv::test::print_process_stacks(getpid());
      std::fprintf(stderr, "*** aborting the hung test\n");
      std::abort();
    }
  }

  const int seconds_;
  std::mutex mu_;
  std::condition_variable cv_;
  char name_[512] = {};
  std::chrono::steady_clock::time_point deadline_;
  bool running_ = false;
};

class HangWatchdog : public testing::EmptyTestEventListener {
 public:
  explicit HangWatchdog(Watch* watch) : watch_(watch) {}
  void OnTestStart(const testing::TestInfo& info) override { watch_->start(info); }
  void OnTestEnd(const testing::TestInfo&) override { watch_->end(); }

 private:
  Watch* watch_;
};

// Registered before main() runs the tests (gtest_main's main calls
// InitGoogleTest, which keeps listeners appended before it).
const bool registered = [] {
  const int seconds = hang_seconds();
  if (seconds <= 0) return true;
  if (Watch* w = Watch::create(seconds)) testing::UnitTest::GetInstance()->listeners().Append(new HangWatchdog(w));
  return true;
}();

}  // namespace
