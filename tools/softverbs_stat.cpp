// softverbs-stat: the RoCEv2 counters of the running processes that use
// softverbs (transport/roce_counters.h), per process and per QP, and the
// faults injected in each (core/fault_control.h); and faults switched on
// or off in a running process.
//   softverbs-stat [-p PID] [-a]
//     -p PID  only that process
//     -a      every counter, also those still at zero
//   softverbs-stat -p PID -f RULES
//     RULES (SOFTVERBS_FAULTS' syntax; "" for none) in force in process PID
//     from its next verbs call or packet on, instead of its rules before
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <thread>

#include "core/fault_control.h"
#include "core/faults.h"
#include "shm/runtime_dir.h"
#include "transport/roce_counters.h"
#include "util/clock.h"

using namespace sv::roce;
namespace faults = sv::faults;

namespace {

bool alive(uint32_t pid) { return kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM; }

// A live process's file, mapped (`writable` for the fault page); nullptr
// when there is none.
void* map_file(const std::string& path, size_t size, bool writable) {
  int fd = open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return nullptr;
  struct stat st;
  void* p = MAP_FAILED;
  if (fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) >= size)
    p = mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? nullptr : p;
}

const faults::ControlPage* fault_page(pid_t pid) {
  auto* c = static_cast<faults::ControlPage*>(map_file(faults::control_path(pid), sizeof(faults::ControlPage), false));
  if (c && (c->magic != faults::kControlMagic || c->version != faults::kControlVersion || !alive(c->pid))) {
    munmap(c, sizeof *c);
    return nullptr;
  }
  return c;
}

// Prints one process's counters and faults; false when it is not a live
// softverbs process with either.
bool show(pid_t pid, bool all) {
  const auto* f = static_cast<const StatsFile*>(map_file(stats_path(pid), sizeof(StatsFile), false));
  if (f && !(f->magic == kStatsMagic && f->version == kStatsVersion && alive(f->pid))) {
    munmap(const_cast<StatsFile*>(f), sizeof(StatsFile));
    f = nullptr;
  }
  const faults::ControlPage* c = fault_page(pid);
  // (Every process that opened the device has a fault page: shown when
  // faults are or were in force.)
  const bool faults_shown = c && (c->rules[0] || c->injected.load(std::memory_order_relaxed) || all);
  if (f || faults_shown) std::printf("process %d\n", static_cast<int>(pid));
  if (f) {
    print_counters(stdout, "device", f->device, f->counters, all);
    for (const StatsQp& q : f->qps) {
      uint32_t qpn = q.qpn.load(std::memory_order_acquire);
      if (!qpn) continue;
      char name[32];
      std::snprintf(name, sizeof name, "QP %#x", qpn);
      print_counters(stdout, name, q.c, f->counters, all);
    }
    munmap(const_cast<StatsFile*>(f), sizeof(StatsFile));
  }
  if (faults_shown) {
    std::printf("  %-10s injected %llu rules '%.*s'%s%s\n", "faults",
                static_cast<unsigned long long>(c->injected.load(std::memory_order_relaxed)),
                static_cast<int>(sizeof c->rules), c->rules, c->status[0] ? " status " : "", c->status);
  }
  if (c) munmap(const_cast<faults::ControlPage*>(c), sizeof *c);
  return f || faults_shown;
}

// Puts RULES in force in process `pid`: 0, or 1 with the reason said.
int set_faults(pid_t pid, const std::string& rules) {
  faults::Rules parsed;
  std::string why;
  if (!faults::parse(rules, &parsed, &why)) {
    std::fprintf(stderr, "softverbs-stat: %s\n", why.c_str());
    return 1;
  }
  for (const faults::Rule& r : parsed.rules)
    if (r.call != faults::Call::kCount && faults::is_rdmacm_call(r.call)) {
      std::fprintf(stderr, "softverbs-stat: %s: librdmacm's calls take their rules from SOFTVERBS_FAULTS only\n",
                   r.text.c_str());
      return 1;
    }
  const faults::HookFlags flags = faults::hook_flags(parsed);
  const std::string path = faults::control_path(pid);
  auto* c = static_cast<faults::ControlPage*>(map_file(path, sizeof(faults::ControlPage), true));
  if (!c || c->magic != faults::kControlMagic || c->version != faults::kControlVersion || !alive(c->pid)) {
    std::fprintf(stderr, "softverbs-stat: process %d has no fault control page (%s): not ours, not running, or "
                 "it has not opened the device yet\n", static_cast<int>(pid), path.c_str());
    if (c) munmap(c, sizeof *c);
    return 1;
  }
  if (!faults::write_rules(c, rules, flags.armed, flags.packets, &why)) {
    std::fprintf(stderr, "softverbs-stat: %s\n", why.c_str());
    munmap(c, sizeof *c);
    return 1;
  }
  const uint32_t gen = c->generation.load(std::memory_order_acquire);
  // The process takes them at its next verbs call or packet: said if that
  // is within a second.
  const uint64_t until = sv::monotonic_ns() + 1'000'000'000;
  while (c->taken.load(std::memory_order_acquire) != gen && sv::monotonic_ns() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (c->taken.load(std::memory_order_acquire) == gen)
    std::printf("process %d: %s\n", static_cast<int>(pid), c->status);
  else
    std::printf("process %d: %zu rules written; in force from its next verbs call or packet\n", static_cast<int>(pid),
                parsed.rules.size());
  munmap(c, sizeof *c);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  long only = -1;
  bool all = false, set = false;
  std::string rules;
  for (int opt; (opt = getopt(argc, argv, "p:af:h")) != -1;) {
    switch (opt) {
      case 'p':
        only = std::strtol(optarg, nullptr, 10);
        break;
      case 'a':
        all = true;
        break;
      case 'f':
        set = true;
        rules = optarg;
        break;
      default:
        std::fprintf(stderr, "usage: %s [-p PID] [-a]\n       %s -p PID -f RULES\n", argv[0], argv[0]);
        return opt == 'h' ? 0 : 2;
    }
  }
  if (set) {
    if (only < 0) {
      std::fprintf(stderr, "softverbs-stat: -f needs -p PID\n");
      return 2;
    }
    return set_faults(static_cast<pid_t>(only), rules);
  }
  if (only >= 0) return show(static_cast<pid_t>(only), all) ? 0 : 1;
  const std::string& dir = sv::shm::runtime_dir();
  DIR* d = dir.empty() ? nullptr : opendir(dir.c_str());
  if (!d) return 1;
  std::set<pid_t> pids;  // (in order, each once: a process may have both files)
  while (dirent* e = readdir(d))
    if (std::strncmp(e->d_name, "net.", 4) == 0 || std::strncmp(e->d_name, "ctl.", 4) == 0)
      pids.insert(static_cast<pid_t>(std::strtol(e->d_name + 4, nullptr, 10)));
  closedir(d);
  int shown = 0;
  for (pid_t pid : pids) shown += show(pid, all);
  if (!shown) std::printf("no process of this user is using the RoCEv2 transport or has faults in force\n");
  return 0;
}
