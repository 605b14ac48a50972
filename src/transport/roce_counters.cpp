#include "transport/roce_counters.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "core/trace.h"
#include "shm/runtime_dir.h"
#include "util/knobs.h"
#include "util/log.h"

namespace sv::roce {

const char* counter_name(uint32_t c) {
  static const char* const kNames[kCounterCount] = {
      "packets_sent",   "packets_received",   "bytes_sent",         "bytes_received",
      "retransmits",    "ack_timeouts",       "probes",       "seq_naks_sent",      "seq_naks_received",
      "rnr_naks_sent",  "rnr_naks_received",  "error_naks_sent",    "error_naks_received",
      "duplicates",     "icrc_errors",        "no_qp",              "wrong_transport",
      "stale_reads",    "foreign_senders", "forwarded",
      "steered_flows",  "answers_carried",    "answers_alone",      "app_receives",
      "thread_receives", "unattested",      "ring_datagrams", "watch_arms"};
  return c < kCounterCount ? kNames[c] : "?";
}

void print_counters(FILE* out, const char* what, const CounterBlock& b, uint32_t count, bool all) {
  std::fprintf(out, "  %-10s", what);
  for (uint32_t c = 0; c < count && c < kCounterCount; ++c) {
    uint64_t v = b.v[c].load(std::memory_order_relaxed);
    if (v || all) std::fprintf(out, " %s %llu", counter_name(c), static_cast<unsigned long long>(v));
  }
  std::fprintf(out, "\n");
}

std::string stats_path(pid_t pid) {
  const std::string& dir = shm::runtime_dir();
  return dir.empty() ? "" : dir + "/net." + std::to_string(pid);
}

void Counters::open() {
  if (file_) return;
  path_ = stats_path(getpid());
  if (path_.empty()) return;  // runtime_dir said why
  int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  // Pages allocated now (ftruncate alone would leave them to the first
  // touch: a SIGBUS on a full /dev/shm). The counters are for people, not
  // for the traffic: without them the device works, and says why.
  int err = fd < 0 ? errno : posix_fallocate(fd, 0, sizeof(StatsFile));
  if (err) {
    SV_WARN("no RoCEv2 counters file %s: %s", path_.c_str(), strerror(err));
    if (fd >= 0) {
      ::close(fd);
      unlink(path_.c_str());
    }
    path_.clear();
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
  static const StatsFile* exit_file = nullptr;
  exit_file = file_;
  if (!exit_path) {
    exit_path = new std::string(path_);
    std::atexit([] {  // (a fork()ed child that never opened its own leaves the parent's alone)
      if (*exit_path != stats_path(getpid())) return;
      unlink(exit_path->c_str());
      if (knobs().stat_at_exit) {
        std::fprintf(stderr, "process %u at exit\n", exit_file->pid);
        print_counters(stderr, "device", exit_file->device, kCounterCount, false);
      }
    });
  } else {
    *exit_path = path_;
  }
}

void Counters::open_in_memory() {
  if (file_) return;
  file_ = new StatsFile();  // (never freed: a test's engines are few)
  file_->counters = kCounterCount;
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
  if (__builtin_expect(trace::g_on, 0)) trace_event(qpn, c);
}

// What the engine did for QP `qpn`, on the timeline (core/trace.h): the
// recovery counters as instant events, the packet counts as a counter.
void Counters::trace_event(uint32_t qpn, Counter c) {
  switch (c) {
    case kPacketsSent:
    case kPacketsReceived:
      if (StatsQp* q = slot(qpn))
        trace::packets(qpn, q->c.v[kPacketsSent].load(std::memory_order_relaxed),
                       q->c.v[kPacketsReceived].load(std::memory_order_relaxed));
      return;
    case kRetransmits:
    case kAckTimeouts:
    case kProbes:
    case kSeqNaksSent:
    case kSeqNaksReceived:
    case kRnrNaksSent:
    case kRnrNaksReceived:
    case kErrorNaksSent:
    case kErrorNaksReceived:
    case kDuplicates:
      trace::instant_qpn(qpn, counter_name(c), "");
      return;
    default:
      return;
  }
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
  if (it->second) {
    if (knobs().stat_at_exit) {
      char what[32];
      std::snprintf(what, sizeof what, "QP %#x", qpn);
      print_counters(stderr, what, it->second->c, kCounterCount, false);
    }
    it->second->qpn.store(0, std::memory_order_release);
  }
  if (last_slot_ == it->second) last_slot_ = nullptr;
  slots_.erase(it);
}

}  // namespace sv::roce
