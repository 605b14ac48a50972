// The keeper: one background thread per process that holds this process's
// liveness lock in the registry for as long as the process lives, so that
// peers learn of our death from the kernel (robust futex) and not from pids.
// It sleeps; it never spins.
//
// The keeper makes the claim itself (keeper_run): the claim takes the
// registry's claims lock, which every process that attaches waits for, and
// locks the new slot's liveness mutex under it. Done on the thread that
// keeps that mutex, the lock is taken at once; done on the application's
// thread, it waited for the keeper to be created and scheduled, 10-60 ms
// with thousands of processes starting on two cores, and a ring of 4096
// processes timed out waiting for each other's claims.
#pragma once

#include <pthread.h>

#include <type_traits>

namespace sv::shm {

// Runs `fn(arg)` on the keeper thread (started first, once) and returns
// when it returned: true, or false (said why) when the keeper could not be
// started. What `fn` locks stays locked for the life of the process: the
// keeper never exits.
bool keeper_run_raw(void (*fn)(void*), void* arg);

template <typename Fn>
bool keeper_run(Fn&& fn) {
  return keeper_run_raw([](void* f) { (*static_cast<std::remove_reference_t<Fn>*>(f))(); }, &fn);
}

// Called in a fork child: the keeper thread does not exist there.
void keeper_forget_after_fork();

}  // namespace sv::shm
