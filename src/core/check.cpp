#include "core/check.h"

#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/post_hooks.h"
#include "core/trace.h"
#include "util/knobs.h"
#include "util/log.h"

namespace sv {
bool g_post_hooks = false;
}

namespace sv::check {

Mode g_mode = Mode::kOff;
std::atomic<int64_t> g_live_mrs{0};
std::atomic<bool> g_fork_init{false};

namespace {

// fork-without-fork-init: in the parent, before the fork.
void before_fork() {
  const int64_t mrs = g_live_mrs.load(std::memory_order_relaxed);
  if (mrs > 0 && !g_fork_init.load(std::memory_order_relaxed))
    report("fork-without-fork-init",
           "fork() with %ld memory regions registered and ibv_fork_init() never called (nor RDMAV_FORK_SAFE set): "
           "on a NIC and a kernel before 5.13, a registered page the parent writes after the fork is copied, and "
           "the device goes on reading and writing the old one (later kernels copy pinned pages at fork: "
           "ibv_is_fork_initialized() says IBV_FORK_UNNEEDED there, as here)",
           static_cast<long>(mrs));
}

}  // namespace

void load() {
  static std::once_flag once;
  std::call_once(once, [] {
    const std::string& v = knobs().check;
    if (v == "warn") g_mode = Mode::kWarn;
    else if (v == "abort") g_mode = Mode::kAbort;
    else if (!v.empty() && v != "off") SV_WARN("SOFTVERBS_CHECK=%s: warn, abort or off; the checks stay off", v.c_str());
    if (g_mode != Mode::kOff) {
      pthread_atfork(before_fork, nullptr, nullptr);
      g_post_hooks = true;  // (buffer-reused: each post is checksummed)
    }
  });
}

namespace {

// Whether `addr` is in one of softverbs' libraries (this one, or
// librdmacm.so, which calls into it): its frames are not the call site.
bool ours(void* addr) {
  static void* const own_base = [] {
    Dl_info self{};
    return dladdr(reinterpret_cast<void*>(&report), &self) ? self.dli_fbase : nullptr;
  }();
  Dl_info info{};
  if (!dladdr(addr, &info)) return false;
  if (info.dli_fbase == own_base) return true;
  // (libc's frames are not the call site either: fork() runs our check.)
  return info.dli_fname && (std::strstr(info.dli_fname, "librdmacm.so") || std::strstr(info.dli_fname, "/libc.so"));
}

// "my_program(main+0x53) [0x55d1c0a8b1f3]", or "?" without one.
void call_site(char* out, size_t size) {
  void* frames[48];
  const int n = backtrace(frames, 48);
  for (int i = 1; i < n; ++i) {
    if (ours(frames[i])) continue;
    Dl_info info{};
    if (dladdr(frames[i], &info) && info.dli_fname) {
      const char* file = std::strrchr(info.dli_fname, '/');
      file = file ? file + 1 : info.dli_fname;
      if (info.dli_sname)
        std::snprintf(out, size, "%s(%s+%#lx) [%p]", file, info.dli_sname,
                      static_cast<unsigned long>(static_cast<char*>(frames[i]) - static_cast<char*>(info.dli_saddr)),
                      frames[i]);
      else
        std::snprintf(out, size, "%s(+%#lx) [%p]", file,
                      static_cast<unsigned long>(static_cast<char*>(frames[i]) - static_cast<char*>(info.dli_fbase)),
                      frames[i]);
    } else {
      std::snprintf(out, size, "[%p]", frames[i]);
    }
    return;
  }
  std::snprintf(out, size, "?");
}

}  // namespace

void report(const char* check, const char* fmt, ...) {
  char message[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(message, sizeof message, fmt, ap);
  va_end(ap);
  char site[256];
  call_site(site, sizeof site);
  std::fprintf(stderr, "softverbs[%d] check [%s]: %s\n  called from %s\n", getpid(), check, message, site);
  if (trace::g_on) trace::instant(nullptr, check, message);
  if (g_mode == Mode::kAbort) {
    std::fprintf(stderr, "softverbs[%d] check: aborting (SOFTVERBS_CHECK=abort)\n", getpid());
    std::abort();
  }
}

}  // namespace sv::check
