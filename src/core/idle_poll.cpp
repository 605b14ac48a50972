#include "core/idle_poll.h"

#include <sched.h>

#include "util/clock.h"
#include "util/knobs.h"

namespace sv {

void idle_poll() {
  thread_local IdlePoll poll(uint64_t{knobs().poll_yield_us} * 1000);
  if (poll.empty_poll(monotonic_ns())) sched_yield();
}

}  // namespace sv
