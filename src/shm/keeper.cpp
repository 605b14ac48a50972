#include "shm/keeper.h"

#include <pthread.h>

#include <condition_variable>
#include <mutex>

#include "shm/robust_mutex.h"
#include "util/log.h"
#include "util/private_heap.h"
#include "util/quiet_thread.h"

namespace sv::shm {
namespace {

struct KeeperState : PrivateHeapObject {
  std::mutex mu;
  std::condition_variable cv;
  pthread_mutex_t* request = nullptr;
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
    s.cv.wait(lk, [&] { return s.request != nullptr; });
    if (pthread_mutex_lock(s.request) == EOWNERDEAD) pthread_mutex_consistent(s.request);
    s.request = nullptr;
    s.done = true;
    s.cv.notify_all();
  }
  return nullptr;
}

}  // namespace

bool keeper_hold(pthread_mutex_t* m) {
  KeeperState& s = state();
  std::unique_lock lk(s.mu);
  if (!s.started) {
    if (!start_quiet_thread(keeper_main, nullptr, "softverbs-keep")) {
      SV_ERROR("cannot start the thread that holds this process's registry slot (the host's task limit?): "
               "the device is not opened");
      return false;
    }
    s.started = true;
  }
  s.done = false;
  s.request = m;
  s.cv.notify_all();
  s.cv.wait(lk, [&] { return s.done; });
  return true;
}

// After fork() the child has no keeper thread; a later attach starts one.
void keeper_forget_after_fork() {
  KeeperState& s = state();
  new (&s.mu) std::mutex;
  new (&s.cv) std::condition_variable;
  s.request = nullptr;
  s.done = false;
  s.started = false;
}

}  // namespace sv::shm
