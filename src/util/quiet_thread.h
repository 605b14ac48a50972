// A background thread of the library's own: detached, every signal blocked
// in it (the application's handlers keep running on the application's
// threads), a small stack, a name that says whose it is. Header-only.
#pragma once

#include <pthread.h>
#include <signal.h>

#include <cstddef>

namespace sv {

inline bool start_quiet_thread(void* (*fn)(void*), void* arg, const char* name, size_t stack_bytes = 64 * 1024) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);  // (the new thread inherits the mask)
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, stack_bytes);
  const int rc = pthread_create(&t, &attr, fn, arg);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) return false;
  pthread_setname_np(t, name);
  return true;
}

}  // namespace sv
