#include "core/scheduler.h"

#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "core/requester.h"
#include "util/clock.h"
#include "util/private_heap.h"

namespace sv {
namespace {

class Scheduler;
Scheduler& scheduler_instance();

class Scheduler : public PrivateHeapObject {
 public:
  void schedule(Qp* qp, uint64_t at) {
    std::lock_guard g(mu_);
    start_locked();
    erase_locked(qp);
    due_.emplace(at, qp);
    cv_.notify_all();
  }

  void cancel(Qp* qp) {
    std::unique_lock lk(mu_);
    erase_locked(qp);
    idle_cv_.wait(lk, [&] { return running_ != qp; });
  }

 private:
  void erase_locked(Qp* qp) {
    for (auto it = due_.begin(); it != due_.end(); ++it)
      if (it->second == qp) {
        due_.erase(it);
        return;
      }
  }

  // A fork child has no retry thread: it starts its own when it needs one.
  void forget_after_fork() {
    new (&mu_) std::mutex;
    new (&cv_) std::condition_variable;
    new (&idle_cv_) std::condition_variable;
    due_.clear();
    running_ = nullptr;
    started_ = false;
  }

  void start_locked() {
    if (started_) return;
    started_ = true;
    static bool atfork = (pthread_atfork(nullptr, nullptr, [] { scheduler_instance().forget_after_fork(); }), true);
    (void)atfork;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);  // signals stay with the application's threads
    std::thread([this] { loop(); }).detach();
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  void loop() {
    pthread_setname_np(pthread_self(), "softverbs-retry");
    std::unique_lock lk(mu_);
    for (;;) {
      if (due_.empty()) {
        cv_.wait(lk);
        continue;
      }
      uint64_t now = monotonic_ns();
      auto first = due_.begin();
      if (first->first > now) {
        cv_.wait_for(lk, std::chrono::nanoseconds(first->first - now));
        continue;
      }
      Qp* qp = first->second;
      due_.erase(first);
      running_ = qp;
      lk.unlock();
      resume_send_queue(qp);
      lk.lock();
      running_ = nullptr;
      idle_cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::multimap<uint64_t, Qp*> due_;
  Qp* running_ = nullptr;
  bool started_ = false;
};

Scheduler& scheduler() { return scheduler_instance(); }

Scheduler& scheduler_instance() {
  static Scheduler* s = new Scheduler;  // outlives static destructors: the thread is detached
  return *s;
}

}  // namespace

void schedule_resume(Qp* qp, uint64_t at_ns) { scheduler().schedule(qp, at_ns); }
void cancel_resume(Qp* qp) { scheduler().cancel(qp); }

}  // namespace sv
