// sysfs helpers and fork support.
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "core/check.h"
#include "util/bits.h"
#include "verbs/abi.h"
#include "verbs/sysfs_view.h"

// rdma-core's prototype (infiniband/driver.h): no arguments, a string that
// lives as long as the library. Open MPI checks that
// "<this>/class/infiniband" is a directory before it uses any device.
SV_EXPORT const char* ibv_get_sysfs_path(void) { return sv::abi::sysfs_root().c_str(); }

SV_EXPORT int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  char path[4096];
  std::snprintf(path, sizeof path, "%s/%s", dir, file);
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t len = ::read(fd, buf, size);
  ::close(fd);
  if (len > 0) {
    if (buf[len - 1] == '\n') buf[--len] = '\0';
    else if (static_cast<size_t>(len) < size) buf[len] = '\0';
    else buf[size - 1] = '\0';
  }
  return static_cast<int>(len);
}

namespace {
bool g_fork_initialized = false;

int madvise_range(void* base, size_t size, int advice) {
  uintptr_t a = sv::align_down(reinterpret_cast<uintptr_t>(base), 4096);
  uintptr_t b = sv::align_up(reinterpret_cast<uintptr_t>(base) + size, 4096);
  return madvise(reinterpret_cast<void*>(a), b - a, advice) ? errno : 0;
}
}  // namespace

// Registered memory stays ordinary memory of the process (it is copied, not
// pinned for DMA), so a fork child gets its own copy of it.
SV_EXPORT int ibv_fork_init(void) {
  g_fork_initialized = true;
  sv::check::g_fork_init.store(true, std::memory_order_relaxed);  // (SOFTVERBS_CHECK's fork-without-fork-init)
  return 0;
}

// As rdma-core on a kernel that copies pinned pages at fork (5.13 on):
// nothing is needed. Here nothing is pinned for a device at all.
SV_EXPORT ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }

SV_EXPORT int ibv_dontfork_range(void* base, size_t size) {
  return g_fork_initialized ? madvise_range(base, size, MADV_DONTFORK) : 0;
}

SV_EXPORT int ibv_dofork_range(void* base, size_t size) {
  return g_fork_initialized ? madvise_range(base, size, MADV_DOFORK) : 0;
}
