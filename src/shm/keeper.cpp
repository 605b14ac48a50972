#include "shm/keeper.h"

#include <pthread.h>

#include <condition_variable>
#include <mutex>
#include <utility>

#include "util/log.h"
#include "util/private_heap.h"
#include "util/quiet_thread.h"

namespace sv::shm {
namespace {

struct KeeperState : PrivateHeapObject {
  std::mutex mu;
  std::condition_variable cv;
  void (*fn)(void*) = nullptr;  // the request, run on the keeper
  void* arg = nullptr;
  bool done = false;
  bool started = false;
};

KeeperState& state() {
  static KeeperState* s = new KeeperState;  // never destroyed: the thread outlives exit handlers
  return *s;
}

void* keeper_main(void*) {
  KeeperState& s = state();
  std::unique_lock lk(s.mu);
  for (;;) {
    s.cv.wait(lk, [&] { return s.fn != nullptr; });
    void (*fn)(void*) = std::exchange(s.fn, nullptr);
    void* arg = s.arg;
    lk.unlock();
    fn(arg);
    lk.lock();
    s.done = true;
    s.cv.notify_all();
  }
  return nullptr;
}

}  // namespace

bool keeper_run_raw(void (*fn)(void*), void* arg) {
  KeeperState& s = state();
  std::unique_lock lk(s.mu);
  if (!s.started) {
    // (A larger stack than a quiet thread's: the claim asks the host
    // service for a lease and tidies dead processes' files on it.)
    if (!start_quiet_thread(keeper_main, nullptr, "softverbs-keep", 256 * 1024)) {
      SV_ERROR("cannot start the thread that holds this process's registry slot (the host's task limit?): "
               "the device is not opened");
      return false;
    }
    s.started = true;
  }
  s.done = false;
  s.fn = fn;
  s.arg = arg;
  s.cv.notify_all();
  s.cv.wait(lk, [&] { return s.done; });
  return true;
}

// After fork() the child has no keeper thread; a later attach starts one.
void keeper_forget_after_fork() {
  KeeperState& s = state();
  new (&s.mu) std::mutex;
  new (&s.cv) std::condition_variable;
  s.fn = nullptr;
  s.done = false;
  s.started = false;
}

}  // namespace sv::shm
