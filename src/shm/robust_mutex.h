// A process-shared, robust pthread mutex living in shared memory. Peers take
// it while they produce into another process's CQ or consume from its
// receive queue; if a peer dies holding it, the next locker gets it back
// (EOWNERDEAD) instead of hanging. The protected data stays consistent
// because every protected update publishes with one final store (a ring
// index), so a half-done update is simply not visible.
#pragma once

#include <errno.h>
#include <pthread.h>

namespace sv::shm {

inline void robust_mutex_init(pthread_mutex_t* m) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(m, &a);
  pthread_mutexattr_destroy(&a);
}

// Locks `m`, taking it back from a holder that died.
inline void robust_lock(pthread_mutex_t* m) {
  if (pthread_mutex_lock(m) == EOWNERDEAD) pthread_mutex_consistent(m);
}

class RobustLock {
 public:
  explicit RobustLock(pthread_mutex_t* m) : m_(m) { robust_lock(m_); }
  ~RobustLock() { pthread_mutex_unlock(m_); }
  RobustLock(const RobustLock&) = delete;
  RobustLock& operator=(const RobustLock&) = delete;

 private:
  pthread_mutex_t* m_;
};

}  // namespace sv::shm
