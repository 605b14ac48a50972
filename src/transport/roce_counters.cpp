#include "transport/roce_counters.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "util/log.h"

namespace sv::roce {

const char* counter_name(uint32_t c) {
  static const char* const kNames[kCounterCount] = {
      "packets_sent",   "packets_received",   "bytes_sent",         "bytes_received",
      "retransmits",    "ack_timeouts",       "probes",       "seq_naks_sent",      "seq_naks_received",
      "rnr_naks_sent",  "rnr_naks_received",  "error_naks_sent",    "error_naks_received",
      "duplicates",     "icrc_errors",        "no_qp",              "wrong_transport",
      "stale_reads"};
  return c < kCounterCount ? kNames[c] : "?";
}

std::string stats_path(uid_t uid, pid_t pid) {
  return "/dev/shm/softverbs-net." + std::to_string(uid) + "." + std::to_string(pid);
}

namespace {

// Files of processes that died without exiting (killed): removed by the next
// process that opens its own, so /dev/shm does not fill up.
void remove_stale_files() {
  const std::string prefix = "softverbs-net." + std::to_string(geteuid()) + ".";
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (std::strncmp(e->d_name, prefix.c_str(), prefix.size()) != 0) continue;
    long pid = std::strtol(e->d_name + prefix.size(), nullptr, 10);
    if (pid > 0 && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH)
      unlink((std::string("/dev/shm/") + e->d_name).c_str());
  }
  closedir(d);
}

}  // namespace

void Counters::open() {
  if (file_) return;
  remove_stale_files();
  path_ = stats_path(geteuid(), getpid());
  int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 || ftruncate(fd, sizeof(StatsFile)) != 0) {
    SV_INFO("no RoCEv2 counters file %s", path_.c_str());
    if (fd >= 0) ::close(fd);
    return;
  }
  void* p = mmap(nullptr, sizeof(StatsFile), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return;
  file_ = static_cast<StatsFile*>(p);
  file_->version = kStatsVersion;
  file_->pid = static_cast<uint32_t>(getpid());
  file_->counters = kCounterCount;
  std::atomic_thread_fence(std::memory_order_release);
  file_->magic = kStatsMagic;  // last: a reader trusts the rest once it sees this
  // At exit only the name goes: the network thread may still count into
  // the mapping until the process is gone.
  static std::string* exit_path = nullptr;
  if (!exit_path) {
    exit_path = new std::string(path_);
    std::atexit([] {  // (a fork()ed child that never opened its own leaves the parent's alone)
      if (*exit_path == stats_path(geteuid(), getpid())) unlink(exit_path->c_str());
    });
  } else {
    *exit_path = path_;
  }
}

void Counters::drop_in_child() {
  if (file_) munmap(file_, sizeof(StatsFile));  // the parent's file, which stays the parent's
  file_ = nullptr;
  path_.clear();
  slots_.clear();
  last_slot_ = nullptr;
}

StatsQp* Counters::slot(uint32_t qpn) {
  if (qpn == last_qpn_ && last_slot_) return last_slot_;  // packets come in runs of one QP
  auto it = slots_.find(qpn);
  if (it != slots_.end()) {
    last_qpn_ = qpn;
    last_slot_ = it->second;
    return it->second;
  }
  for (StatsQp& q : file_->qps) {
    uint32_t free = 0;
    if (q.qpn.load(std::memory_order_relaxed) == 0) {
      for (auto& v : q.c.v) v.store(0, std::memory_order_relaxed);
      if (q.qpn.compare_exchange_strong(free, qpn)) return slots_[qpn] = &q;
    }
  }
  return slots_[qpn] = nullptr;  // all taken: device totals only
}

void Counters::add(uint32_t qpn, Counter c, uint64_t n) {
  if (!file_) return;
  file_->device.v[c].fetch_add(n, std::memory_order_relaxed);
  add_qp(qpn, c, n);
}

void Counters::add_qp(uint32_t qpn, Counter c, uint64_t n) {
  if (!file_) return;
  // One writer (under the engine's mu): no read-modify-write needed.
  if (StatsQp* q = slot(qpn)) q->c.v[c].store(q->c.v[c].load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

void Counters::add_device(Counter c, uint64_t n) {
  if (file_) file_->device.v[c].fetch_add(n, std::memory_order_relaxed);
}

void Counters::forget(uint32_t qpn) {
  auto it = slots_.find(qpn);
  if (it == slots_.end()) return;
  if (it->second) it->second->qpn.store(0, std::memory_order_release);
  if (last_slot_ == it->second) last_slot_ = nullptr;
  slots_.erase(it);
}

}  // namespace sv::roce
