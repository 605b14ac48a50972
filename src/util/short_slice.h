// Asks the scheduler for a short time slice for the calling thread.
//
// Linux's EEVDF scheduler (6.6+) lets a waking thread preempt the running
// one sooner when its slice is shorter (6.12+, sched_setattr's
// sched_runtime on a SCHED_OTHER thread, no privilege needed). The network
// thread sleeps until a packet comes and then has a few microseconds of
// work, while RDMA applications typically spin on every core polling their
// CQs or memory: with the default slice (~3 ms) the woken thread waits for
// a spinner's slice to end, and a ping-pong's round trip with it.
#pragma once

#include <cstdint>

namespace sv {

// Returns false when the kernel refuses (older kernels: the thread keeps
// the default slice, which is correct, only slower to get a core).
bool request_short_slice(uint64_t slice_ns);

}  // namespace sv
