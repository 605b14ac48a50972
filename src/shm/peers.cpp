#include "shm/peers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "shm/arena.h"
#include "shm/fd_lender.h"
#include "shm/registry.h"
#include "shm/shared_lock.h"
#include "util/clock.h"
#include "util/log.h"

namespace sv::shm {
namespace {
constexpr uint64_t kRetireGraceNs = 5'000'000'000ull;

// Descriptor `fd` of process `pid` (open there on inode `ino`), opened
// anew through /proc; where a user namespace between us closes /proc to
// us (EACCES), lent by the process itself (shm/fd_lender.h says when).
int open_peer_fd(pid_t pid, int fd, uint64_t ino, int flags) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  int f = ::open(path.c_str(), flags | O_CLOEXEC);
  if (f >= 0 || (errno != EACCES && errno != EPERM)) return f;
  return borrow_fd(pid, fd, ino);
}
}  // namespace

PeerTable::PeerTable(Registry& registry, Arena& own_arena, uint32_t own_slot)
    : registry_(registry),
      own_arena_(own_arena),
      own_slot_(own_slot),
      lock_id_(lock_owner_id(own_slot, registry.proc(own_slot).incarnation.load())) {}

const Peer* PeerTable::get(uint32_t slot) {
  if (slot == 0 || slot >= kMaxProcs) return nullptr;
  Peer* p = table_[slot].load(std::memory_order_acquire);
  const ProcSlot& ps = registry_.proc(slot);
  if (p && p->incarnation == ps.incarnation.load(std::memory_order_acquire) &&
      ps.state.load(std::memory_order_acquire) == kProcLive)
    return p->alive() ? p : nullptr;
  return map_slow(slot);
}

const Peer* PeerTable::map_slow(uint32_t slot) {
  std::lock_guard g(mu_);
  const ProcSlot& ps = registry_.proc(slot);
  Peer* cur = table_[slot].load(std::memory_order_acquire);
  uint32_t inc = ps.incarnation.load(std::memory_order_acquire);
  if (cur && cur->incarnation == inc && ps.state.load(std::memory_order_acquire) == kProcLive) return cur;
  // Retire the stale mapping; other threads may still be reading through it.
  uint64_t now = monotonic_ns();
  if (cur) {
    table_[slot].store(nullptr, std::memory_order_release);
    retired_.emplace_back(cur, now + kRetireGraceNs);
  }
  for (auto it = retired_.begin(); it != retired_.end();) {
    if (it->second <= now) {
      if (!it->first->self) munmap(it->first->base, it->first->size);
      delete it->first;
      it = retired_.erase(it);
    } else {
      ++it;
    }
  }
  if (ps.state.load(std::memory_order_acquire) != kProcLive || !proc_alive(ps)) return nullptr;

  auto* p = new Peer;
  p->slot = slot;
  p->incarnation = inc;
  p->pid = ps.pid;
  p->proc = &ps;
  if (slot == own_slot_) {
    p->self = true;
    p->base = own_arena_.base();
    p->size = own_arena_.size();
  } else {
    int fd = open_peer_fd(ps.pid, ps.arena_fd, ps.arena_ino, O_RDWR);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || st.st_ino != ps.arena_ino) {
      SV_INFO("cannot map the arena of pid %d (slot %u): %s", ps.pid, slot,
              fd < 0 ? strerror(errno) : "it is gone");
      if (fd >= 0) ::close(fd);
      delete p;
      return nullptr;
    }
    void* m = mmap(nullptr, ps.arena_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) {
      SV_WARN("mapping the arena of pid %d failed: %s", ps.pid, strerror(errno));
      delete p;
      return nullptr;
    }
    madvise(m, ps.arena_size, MADV_DONTFORK);
    p->base = static_cast<uint8_t*>(m);
    p->size = ps.arena_size;
    if (p->header()->magic != kArenaMagic || p->header()->version != kLayoutVersion) {
      munmap(m, p->size);
      delete p;
      return nullptr;
    }
  }
  table_[slot].store(p, std::memory_order_release);
  return p;
}

int PeerTable::doorbell_fd(const Peer& peer, uint32_t index, uint32_t gen) {
  if (index >= kMaxDoorbells) return -1;
  const DoorbellEntry* e = peer.at<DoorbellEntry>(peer.header()->doorbells + index * sizeof(DoorbellEntry));
  if (!e || e->gen.load(std::memory_order_acquire) != gen) return -1;
  std::lock_guard g(mu_);
  auto key = std::make_tuple(peer.slot, peer.incarnation, index);
  auto it = bells_.find(key);
  if (it != bells_.end()) {
    if (it->second.gen == gen) return it->second.fd;
    ::close(it->second.fd);
    bells_.erase(it);
  }
  // Our own doorbells are opened the same way: it keeps one code path and
  // the cost is paid once per doorbell.
  int fd = open_peer_fd(peer.pid, e->write_fd, e->ino, O_WRONLY | O_NONBLOCK);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || st.st_ino != e->ino) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  bells_[key] = OpenBell{gen, fd};
  return fd;
}

}  // namespace sv::shm
