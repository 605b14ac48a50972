// Peers: the other processes of this host whose arenas we map. A peer is
// found by registry slot (the top bits of a QPN or key), mapped once, and
// re-mapped if the slot gets a new owner. Everything a peer's shared memory
// says is data from another process: offsets are bounds-checked before use.
//
// What is mapped of a peer is what we use (issue 39): its tables and queues
// (the arena up to its overlay region, at most 4 GiB) when we first reach
// it, and each 1 GiB window of its overlay (the pages behind its
// registered memory) when we first touch memory there. A whole 64 GiB
// arena per peer let ~2000 peers fill the 128 TiB address space (31 at
// 4 TiB arenas, after which sends to the rest failed). No descriptor is
// kept per peer: a window is mapped through /proc/<pid>/fd when needed,
// and at most kMaxOpenBells doorbells stay open (fewer under a low
// RLIMIT_NOFILE), least recently rung closed first.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "shm/layout.h"
#include "util/private_heap.h"

namespace sv::shm {

class Registry;
class Arena;

// An overlay window: 1 GiB of a peer's arena, mapped with the 2 GiB that
// follow it, so that any one access of up to kOverlayReach bytes that
// starts in the window lies in its mapping (a message is at most 2^31).
inline constexpr uint32_t kOverlayWindowShift = 30;
inline constexpr uint64_t kOverlayReach = 2ull << 30;

struct Peer : PrivateHeapObject {
  uint32_t slot = 0;
  uint32_t incarnation = 0;
  pid_t pid = 0;
  bool self = false;
  uint8_t* base = nullptr;  // its tables and queues: [0, size) of its arena (ours: the whole arena)
  uint64_t size = 0;
  uint64_t arena_size = 0;
  const ProcSlot* proc = nullptr;

  Peer() = default;
  Peer(const Peer&) = delete;
  Peer& operator=(const Peer&) = delete;
  ~Peer();

  bool alive() const { return self || proc_alive(*proc); }
  bool contains(uint64_t off, uint64_t len) const { return off <= size && len <= size - off; }
  template <typename T>
  T* at(uint64_t off) const {
    return contains(off, sizeof(T)) ? reinterpret_cast<T*>(base + off) : nullptr;
  }
  const ArenaHeader* header() const { return reinterpret_cast<const ArenaHeader*>(base); }

  // Bytes [off, off + len) of its overlay region (registered memory),
  // mapped on first use; nullptr when out of its arena or not mappable
  // (then the access fails as a NIC's to a bad address would).
  uint8_t* overlay(uint64_t off, uint64_t len) const {
    if (off > arena_size || len > arena_size - off) return nullptr;
    if (self || contains(off, len)) return base + off;  // (device memory MRs are in the heap)
    if (off < size || len > kOverlayReach) return nullptr;
    const uint64_t w = off >> kOverlayWindowShift;
    uint8_t* m = windows_[w].load(std::memory_order_acquire);
    if (__builtin_expect(!m, 0)) m = map_window(w);
    return m ? m + (off & ((1ull << kOverlayWindowShift) - 1)) : nullptr;
  }

  // (Set up by PeerTable: how to map its windows.)
  int arena_fd = -1;       // the descriptor number in its process
  uint64_t arena_ino = 0;  // and the inode it must name
  void make_windows();

 private:
  uint64_t window_bytes(uint64_t w) const;
  uint8_t* map_window(uint64_t w) const;
  uint64_t window_count_ = 0;
  std::atomic<uint8_t*>* windows_ = nullptr;  // window_count_ of them; nullptr: not mapped yet
  mutable std::mutex window_mu_;
};

class PeerTable {
 public:
  PeerTable(Registry& registry, Arena& own_arena, uint32_t own_slot);

  // The live process that owns registry `slot`, mapped; nullptr if none
  // (never claimed, or its owner died).
  const Peer* get(uint32_t slot);

  // Rings the peer's doorbell `index` (generation `gen`), whose write end
  // is opened on first use and kept while among the kMaxOpenBells most
  // recently rung. False when the doorbell is gone (closed, or its owner
  // died).
  bool ring_doorbell(const Peer& peer, uint32_t index, uint32_t gen);
  static constexpr size_t kMaxOpenBells = 128;
  // How many stay open: kMaxOpenBells, or an eighth of RLIMIT_NOFILE when
  // that is less (at least 4).
  static size_t open_bells_limit();

  Registry& registry() const { return registry_; }
  // This process's identity as a holder of shared locks (shared_lock.h).
  uint32_t lock_id() const { return lock_id_; }

 private:
  const Peer* map_slow(uint32_t slot);

  Registry& registry_;
  Arena& own_arena_;
  uint32_t own_slot_;
  uint32_t lock_id_;
  std::atomic<Peer*> table_[kMaxProcs] = {};
  std::mutex mu_;
  PrivateVector<std::pair<Peer*, uint64_t>> retired_;  // unmapped after a grace period
  struct OpenBell {
    uint32_t gen;
    int fd;
    uint64_t last_rung;  // bells_clock_ then
  };
  std::mutex bells_mu_;  // bells_: a descriptor is written only under it (it may be closed)
  PrivateMap<std::tuple<uint32_t, uint32_t, uint32_t>, OpenBell> bells_;
  uint64_t bells_clock_ = 0;
  void close_oldest_bell();  // (bells_mu_ held, bells_ not empty)
};

}  // namespace sv::shm
