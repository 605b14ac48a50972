#include "core/fault_control.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "shm/runtime_dir.h"
#include "util/clock.h"
#include "util/log.h"

namespace sv::faults {

alignas(kControlBytes) ControlPage g_control{};

std::string control_path(pid_t pid) {
  const std::string& dir = shm::runtime_dir();
  return dir.empty() ? "" : dir + "/ctl." + std::to_string(pid);
}

namespace {

std::string* g_path = nullptr;  // the file the page is in ("" while private)

// A fork()ed child: the page back to private memory, with what it holds.
void detach_in_child() {
  if (!g_path || g_path->empty()) return;
  ControlPage copy;
  std::memcpy(static_cast<void*>(&copy), &g_control, sizeof copy);
  if (mmap(&g_control, sizeof g_control, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) ==
      MAP_FAILED)
    std::abort();  // (nothing of ours can go on without the page)
  std::memcpy(static_cast<void*>(&g_control), &copy, sizeof copy);
  g_control.pid = static_cast<uint32_t>(getpid());
  g_path->clear();
}

}  // namespace

void open_control_file() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_path = new std::string();
    pthread_atfork(nullptr, nullptr, detach_in_child);
    g_control.version = kControlVersion;
    g_control.pid = static_cast<uint32_t>(getpid());
    g_control.magic = kControlMagic;
    const std::string path = control_path(getpid());
    if (path.empty()) return;
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    // Filled before it is mapped over the page: a hook reading the page
    // meanwhile sees the same bytes before and after.
    const bool written = fd >= 0 && posix_fallocate(fd, 0, sizeof g_control) == 0 &&
                         pwrite(fd, &g_control, sizeof g_control, 0) == static_cast<ssize_t>(sizeof g_control);
    if (!written || mmap(&g_control, sizeof g_control, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) ==
                        MAP_FAILED) {
      SV_DEBUG("no fault control file %s: %s (faults cannot be switched from outside)", path.c_str(), strerror(errno));
      if (fd >= 0) {
        ::close(fd);
        unlink(path.c_str());
      }
      return;
    }
    ::close(fd);
    *g_path = path;
    std::atexit([] {
      if (!g_path->empty()) unlink(g_path->c_str());
    });
  });
}

bool write_rules(ControlPage* page, const std::string& rules, bool armed, bool packets, std::string* why) {
  if (rules.size() >= sizeof page->rules) return *why = "rules too long for the page", false;
  // One writer at a time; one that died holding the lock is waited out.
  const uint64_t give_up = monotonic_ns() + 2'000'000'000;
  uint32_t free = 0;
  while (!page->writer.compare_exchange_weak(free, 1, std::memory_order_acquire)) {
    free = 0;
    if (monotonic_ns() > give_up) {
      page->writer.store(0, std::memory_order_release);
      free = 0;
      continue;
    }
    std::this_thread::yield();
  }
  std::memcpy(page->rules, rules.c_str(), rules.size() + 1);
  page->generation.fetch_add(1, std::memory_order_release);
  // Raised after the rules are there: the hook that sees a flag finds
  // them. (Lowered only by the process, once it took rules without them.)
  if (armed) set_flag(&page->armed, true);
  if (packets) set_flag(&page->packets, true);
  page->writer.store(0, std::memory_order_release);
  return true;
}

}  // namespace sv::faults
