// The keeper: one background thread per process that holds this process's
// liveness lock in the registry for as long as the process lives, so that
// peers learn of our death from the kernel (robust futex) and not from pids.
// It sleeps; it never spins.
#pragma once

#include <pthread.h>

namespace sv::shm {

// Starts the keeper (once) and has it lock `m`. Returns true when it holds
// it, false (said why) when the keeper could not be started.
bool keeper_hold(pthread_mutex_t* m);

}  // namespace sv::shm

namespace sv::shm {
// Called in a fork child: the keeper thread does not exist there.
void keeper_forget_after_fork();
}  // namespace sv::shm
