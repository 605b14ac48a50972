#include "util/short_slice.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace sv {
namespace {

// struct sched_attr, first version (SCHED_ATTR_SIZE_VER0, 48 bytes): the
// uapi header's definition clashes with glibc's <sched.h>.
struct SchedAttrV0 {
  uint32_t size;
  uint32_t sched_policy;
  uint64_t sched_flags;
  int32_t sched_nice;
  uint32_t sched_priority;
  uint64_t sched_runtime;
  uint64_t sched_deadline;
  uint64_t sched_period;
};
static_assert(sizeof(SchedAttrV0) == 48);

}  // namespace

bool request_short_slice(uint64_t slice_ns) {
  SchedAttrV0 attr{};
  attr.size = sizeof attr;
  attr.sched_policy = SCHED_OTHER;
  // sched_setattr sets the nice value too: keep the thread's.
  attr.sched_nice = getpriority(PRIO_PROCESS, 0);
  attr.sched_runtime = slice_ns;  // the kernel clamps it to 0.1..100 ms
  return syscall(SYS_sched_setattr, 0, &attr, 0) == 0;
}

}  // namespace sv
