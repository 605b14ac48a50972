#include "shm/peers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "shm/arena.h"
#include "shm/doorbell.h"
#include "shm/fd_lender.h"
#include "shm/registry.h"
#include "shm/shared_lock.h"
#include "util/clock.h"
#include "util/file_limit.h"
#include "util/log.h"

namespace sv::shm {
namespace {
constexpr uint64_t kRetireGraceNs = 5'000'000'000ull;

// Descriptor `fd` of process `pid` (open there on inode `ino`), opened
// anew through /proc; where a user namespace between us closes /proc to
// us (EACCES), lent by the process itself (shm/fd_lender.h says when).
// -1 with errno ESTALE when what we got is not on `ino` (the process or
// its descriptor was replaced).
int open_peer_fd(pid_t pid, int fd, uint64_t ino, int flags) {
  const std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
  int f = ::open(path.c_str(), flags | O_CLOEXEC);
  if (f < 0 && (errno == EACCES || errno == EPERM)) f = borrow_fd(pid, fd, ino);
  struct stat st;
  if (f >= 0 && (fstat(f, &st) != 0 || st.st_ino != ino)) {
    ::close(f);
    errno = ESTALE;
    return -1;
  }
  return f;
}

const char* why_not_opened() { return errno == ESTALE ? "it is gone" : strerror(errno); }
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
    p->arena_size = own_arena_.size();
  } else {
    int fd = open_peer_fd(ps.pid, ps.arena_fd, ps.arena_ino, O_RDWR);
    if (fd < 0) {
      SV_INFO("cannot map the arena of pid %d (slot %u): %s", ps.pid, slot, why_not_opened());
      delete p;
      return nullptr;
    }
    // Its tables and queues now; its overlay a window at a time (overlay()).
    const uint64_t front = std::min(overlay_begin_for(ps.arena_size), ps.arena_size);
    void* m = mmap(nullptr, front, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    ::close(fd);
    if (m == MAP_FAILED) {
      SV_WARN("mapping the arena of pid %d failed: %s", ps.pid, strerror(errno));
      delete p;
      return nullptr;
    }
    madvise(m, front, MADV_DONTFORK);
    p->base = static_cast<uint8_t*>(m);
    p->size = front;
    p->arena_size = ps.arena_size;
    p->arena_fd = ps.arena_fd;
    p->arena_ino = ps.arena_ino;
    if (p->header()->magic != kArenaMagic || p->header()->version != kLayoutVersion ||
        p->header()->overlay_begin != front) {
      delete p;
      return nullptr;
    }
    p->make_windows();
  }
  table_[slot].store(p, std::memory_order_release);
  return p;
}

size_t PeerTable::open_bells_limit() { return sv::file_limit_share(8, 4, kMaxOpenBells); }

void PeerTable::close_oldest_bell() {
  auto oldest = bells_.begin();
  for (auto b = bells_.begin(); b != bells_.end(); ++b)
    if (b->second.last_rung < oldest->second.last_rung) oldest = b;
  ::close(oldest->second.fd);
  bells_.erase(oldest);
}

bool PeerTable::ring_doorbell(const Peer& peer, uint32_t index, uint32_t gen) {
  if (index >= kMaxDoorbells) return false;
  const DoorbellEntry* e = peer.at<DoorbellEntry>(peer.header()->doorbells + index * sizeof(DoorbellEntry));
  if (!e || e->gen.load(std::memory_order_acquire) != gen) return false;
  std::lock_guard g(bells_mu_);
  auto key = std::make_tuple(peer.slot, peer.incarnation, index);
  auto it = bells_.find(key);
  if (it != bells_.end() && it->second.gen != gen) {
    ::close(it->second.fd);
    bells_.erase(it);
    it = bells_.end();
  }
  if (it == bells_.end()) {
    // Our own doorbells are opened the same way: it keeps one code path and
    // the cost is paid once per doorbell.
    // The least recently rung goes first: a process may have thousands of
    // peers, and the descriptors it may open are the application's too.
    if (bells_.size() >= open_bells_limit()) close_oldest_bell();
    int fd = open_peer_fd(peer.pid, e->write_fd, e->ino, O_WRONLY | O_NONBLOCK);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && !bells_.empty()) {
      // Out of descriptors: a doorbell of ours gives its own (a wake-up
      // lost here would leave the peer asleep for good).
      close_oldest_bell();
      fd = open_peer_fd(peer.pid, e->write_fd, e->ino, O_WRONLY | O_NONBLOCK);
    }
    if (fd < 0) return false;
    it = bells_.emplace(key, OpenBell{gen, fd, 0}).first;
  }
  it->second.last_rung = ++bells_clock_;
  ring_fd(it->second.fd);
  return true;
}

Peer::~Peer() {
  if (self) return;
  for (uint64_t w = 0; w < window_count_; ++w)
    if (uint8_t* m = windows_[w].load(std::memory_order_relaxed)) munmap(m, window_bytes(w));
  if (windows_) private_heap().deallocate(windows_, window_count_ * sizeof *windows_, alignof(std::atomic<uint8_t*>));
  if (base) munmap(base, size);
}

void Peer::make_windows() {
  window_count_ = (arena_size + (1ull << kOverlayWindowShift) - 1) >> kOverlayWindowShift;
  // (On our own heap, as the Peer: util/private_heap.h says why.)
  void* a = private_heap().allocate(window_count_ * sizeof *windows_, alignof(std::atomic<uint8_t*>));
  windows_ = static_cast<std::atomic<uint8_t*>*>(a);
  for (uint64_t w = 0; w < window_count_; ++w) new (&windows_[w]) std::atomic<uint8_t*>(nullptr);
}

// Window `w` of the overlay: [w GiB, w GiB + 1 GiB + kOverlayReach) of the
// arena, clipped at its end.
uint64_t Peer::window_bytes(uint64_t w) const {
  return std::min(arena_size - (w << kOverlayWindowShift), uint64_t{(1ull << kOverlayWindowShift) + kOverlayReach});
}

// Window `w`, mapped once and kept while the Peer lives.
uint8_t* Peer::map_window(uint64_t w) const {
  if (w >= window_count_) return nullptr;
  std::lock_guard g(window_mu_);
  if (uint8_t* m = windows_[w].load(std::memory_order_acquire)) return m;
  const uint64_t begin = w << kOverlayWindowShift;
  const uint64_t len = window_bytes(w);
  int fd = open_peer_fd(pid, arena_fd, arena_ino, O_RDWR);
  if (fd < 0) {
    SV_INFO("cannot map memory of pid %d (slot %u): %s", pid, slot, why_not_opened());
    return nullptr;
  }
  void* m = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, static_cast<off_t>(begin));
  ::close(fd);
  if (m == MAP_FAILED) {
    SV_WARN("mapping %lu MiB of the memory of pid %d failed: %s", static_cast<unsigned long>(len >> 20), pid,
            strerror(errno));
    return nullptr;
  }
  madvise(m, len, MADV_DONTFORK);
  windows_[w].store(static_cast<uint8_t*>(m), std::memory_order_release);
  return static_cast<uint8_t*>(m);
}

}  // namespace sv::shm
