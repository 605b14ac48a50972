#include "util/vma_query.h"

#include <fcntl.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>
#include <new>

namespace sv {
namespace {

// <linux/fs.h> of Linux 6.11; libc headers of older systems lack it.
struct ProcmapQuery {
  uint64_t size;
  uint64_t query_flags;
  uint64_t query_addr;
  uint64_t vma_start, vma_end;
  uint64_t vma_flags;
  uint64_t vma_page_size;
  uint64_t vma_offset;
  uint64_t inode;
  uint32_t dev_major, dev_minor;
  uint32_t vma_name_size;
  uint32_t build_id_size;
  uint64_t vma_name_addr;
  uint64_t build_id_addr;
};
static_assert(sizeof(ProcmapQuery) == 104);
constexpr unsigned long kProcmapQuery = _IOWR('f', 17, ProcmapQuery);
constexpr uint64_t kVmaReadable = 0x01, kVmaWritable = 0x02, kVmaExecutable = 0x04, kVmaShared = 0x08;
constexpr uint64_t kCoveringOrNextVma = 0x10;

// One descriptor of /proc/self/maps for every query, under a lock (the
// ioctl is not documented as safe on one file from two threads at once).
// The descriptor describes the mm of the process that opened it: a fork()
// child inherits one that answers about its parent, so the child drops it
// (and the lock, which another thread of the parent may have held) and
// opens its own on first use.
std::mutex g_maps_mu;
int g_maps_fd = -1;
std::atomic<int> g_query_available{-1};  // -1 not yet known, 0 no, 1 yes

__attribute__((constructor)) void forget_descriptor_in_fork_child() {
  pthread_atfork(nullptr, nullptr, [] {
    new (&g_maps_mu) std::mutex;
    if (g_maps_fd >= 0) ::close(g_maps_fd);
    g_maps_fd = -1;
  });
}

MapEntry entry_of(const ProcmapQuery& q, const char* name) {
  MapEntry e;
  e.start = q.vma_start;
  e.end = q.vma_end;
  e.read = q.vma_flags & kVmaReadable;
  e.write = q.vma_flags & kVmaWritable;
  e.exec = q.vma_flags & kVmaExecutable;
  e.shared = q.vma_flags & kVmaShared;
  e.offset = q.vma_offset;
  e.inode = q.inode;
  if (q.vma_name_size > 1) e.path.assign(name, q.vma_name_size - 1);  // (the size counts the NUL)
  return e;
}

// Asks the kernel; false when it cannot answer (no such ioctl).
bool query(uint64_t start, uint64_t end, bool with_names, std::vector<MapEntry>& out) {
  std::lock_guard g(g_maps_mu);
  if (g_maps_fd < 0) g_maps_fd = ::open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (g_maps_fd < 0) return false;
  char name[4096];
  for (uint64_t at = start; at < end;) {
    ProcmapQuery q{};
    q.size = sizeof q;
    q.query_flags = kCoveringOrNextVma;
    q.query_addr = at;
    if (with_names) {
      q.vma_name_addr = reinterpret_cast<uint64_t>(name);
      q.vma_name_size = sizeof name;
    }
    int r = ::ioctl(g_maps_fd, kProcmapQuery, &q);
    if (r != 0 && errno == ENAMETOOLONG && with_names) {  // a path beyond 4 KiB: this mapping without it
      q.vma_name_addr = 0;
      q.vma_name_size = 0;
      r = ::ioctl(g_maps_fd, kProcmapQuery, &q);
    }
    if (r != 0) {
      if (errno == ENOENT) break;  // no mapping at or after `at`
      return false;
    }
    if (q.vma_start >= end) break;
    out.push_back(entry_of(q, name));
    if (q.vma_end <= at) return false;  // (never: the kernel answers at or after `at`)
    at = q.vma_end;
  }
  return true;
}

}  // namespace

std::vector<MapEntry> mappings_over(uint64_t start, uint64_t end, bool with_names) {
  std::vector<MapEntry> out;
  if (g_query_available.load(std::memory_order_relaxed) != 0) {
    if (query(start, end, with_names, out)) {
      g_query_available.store(1, std::memory_order_relaxed);
      return out;
    }
    out.clear();
    // Refused on first use: this kernel has no PROCMAP_QUERY. (A later
    // failure, say out of file descriptors, reads the file this once.)
    if (g_query_available.load(std::memory_order_relaxed) < 0) g_query_available.store(0, std::memory_order_relaxed);
  }
  for (MapEntry& e : read_proc_maps())
    if (e.end > start && e.start < end) out.push_back(std::move(e));
  return out;
}

bool vma_query_available() {
  if (g_query_available.load(std::memory_order_relaxed) < 0) mappings_over(0, 1, false);
  return g_query_available.load(std::memory_order_relaxed) == 1;
}

}  // namespace sv
