// softverbs-stat: the RoCEv2 counters of the running processes that use
// softverbs (transport/roce_counters.h), per process and per QP.
//   softverbs-stat [-p PID] [-a]
//     -p PID  only that process
//     -a      every counter, also those still at zero
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
#include <string>

#include "shm/runtime_dir.h"
#include "transport/roce_counters.h"

using namespace sv::roce;

namespace {

// Prints one process's file; false when it is not a live softverbs process.
bool show(const std::string& path, bool all) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(StatsFile)) {
    close(fd);
    return false;
  }
  void* p = mmap(nullptr, sizeof(StatsFile), PROT_READ, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return false;
  const auto* f = static_cast<const StatsFile*>(p);
  bool ok = f->magic == kStatsMagic && f->version == kStatsVersion &&
            (kill(static_cast<pid_t>(f->pid), 0) == 0 || errno == EPERM);
  if (ok) {
    std::printf("process %u\n", f->pid);
    print_counters(stdout, "device", f->device, f->counters, all);
    for (const StatsQp& q : f->qps) {
      uint32_t qpn = q.qpn.load(std::memory_order_acquire);
      if (!qpn) continue;
      char name[32];
      std::snprintf(name, sizeof name, "QP %#x", qpn);
      print_counters(stdout, name, q.c, f->counters, all);
    }
  }
  munmap(p, sizeof(StatsFile));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  long only = -1;
  bool all = false;
  for (int opt; (opt = getopt(argc, argv, "p:ah")) != -1;) {
    switch (opt) {
      case 'p':
        only = std::strtol(optarg, nullptr, 10);
        break;
      case 'a':
        all = true;
        break;
      default:
        std::fprintf(stderr, "usage: %s [-p PID] [-a]\n", argv[0]);
        return opt == 'h' ? 0 : 2;
    }
  }
  if (only >= 0) return show(stats_path(static_cast<pid_t>(only)), all) ? 0 : 1;
  const std::string& dir = sv::shm::runtime_dir();
  DIR* d = dir.empty() ? nullptr : opendir(dir.c_str());
  if (!d) return 1;
  int shown = 0;
  while (dirent* e = readdir(d))
    if (std::strncmp(e->d_name, "net.", 4) == 0) shown += show(dir + "/" + e->d_name, all);
  closedir(d);
  if (!shown) std::printf("no process of this user is using the RoCEv2 transport\n");
  return 0;
}
