#include "core/pinned_pages.h"

#include <linux/capability.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>

#include "util/knobs.h"
#include "util/log.h"

namespace sv {
namespace {

std::atomic<uint64_t> g_pinned{0};

// The kernel asks capable(CAP_IPC_LOCK), which is about the initial user
// namespace: root of a user namespace (softverbs-run without root, rootless
// containers) holds the capability there but is still limited.
bool in_initial_user_namespace() {
  FILE* f = std::fopen("/proc/self/uid_map", "r");
  if (!f) return true;
  unsigned long inside = 1, outside = 1, count = 0;
  int n = std::fscanf(f, "%lu %lu %lu", &inside, &outside, &count);
  std::fclose(f);
  return n == 3 && inside == 0 && outside == 0 && count == 4294967295ul;
}

bool has_ipc_lock() {
  __user_cap_header_struct hdr{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2]{};
  if (syscall(SYS_capget, &hdr, data) != 0) return false;
  // The namespace read once: a process past its limit asks on every
  // registration, and opening and parsing the file cost more than the rest
  // of a registration's bookkeeping. (A process that moves to another user
  // namespace, unshare(2), keeps the first answer.)
  static const bool initial_namespace = in_initial_user_namespace();
  return (data[CAP_TO_INDEX(CAP_IPC_LOCK)].effective & CAP_TO_MASK(CAP_IPC_LOCK)) && initial_namespace;
}

// A fork()ed child has pinned nothing: the kernel gives it a new mm.
__attribute__((constructor)) void register_fork_reset() {
  pthread_atfork(nullptr, nullptr, [] { g_pinned.store(0, std::memory_order_relaxed); });
}

}  // namespace

uint64_t pages_spanned(uint64_t addr, uint64_t length) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t first = addr / page, end = (addr + length + page - 1) / page;
  return end - first;
}

bool charge_pinned_pages(uint64_t pages) {
  const uint64_t now = g_pinned.fetch_add(pages, std::memory_order_relaxed) + pages;
  if (knobs().ignore_memlock) return true;
  rlimit lim{};
  if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0 || lim.rlim_cur == RLIM_INFINITY) return true;
  const uint64_t limit_pages = lim.rlim_cur / static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  if (now <= limit_pages || has_ipc_lock()) return true;
  g_pinned.fetch_sub(pages, std::memory_order_relaxed);
  SV_INFO("reg_mr: %lu pages would pass RLIMIT_MEMLOCK (%lu pages, %lu pinned): ENOMEM; raise `ulimit -l`",
          static_cast<unsigned long>(pages), static_cast<unsigned long>(limit_pages),
          static_cast<unsigned long>(now - pages));
  return false;
}

void uncharge_pinned_pages(uint64_t pages) {
  // Saturating: a fork()ed child starts from nothing (as its new mm does)
  // yet may deregister MRs it inherited.
  uint64_t cur = g_pinned.load(std::memory_order_relaxed);
  while (!g_pinned.compare_exchange_weak(cur, cur > pages ? cur - pages : 0, std::memory_order_relaxed)) {}
}

uint64_t pinned_pages() { return g_pinned.load(std::memory_order_relaxed); }

}  // namespace sv
