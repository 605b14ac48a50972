// Peers: the other processes of this host whose arenas we map. A peer is
// found by registry slot (the top bits of a QPN or key), mapped once, and
// re-mapped if the slot gets a new owner. Everything a peer's shared memory
// says is data from another process: offsets are bounds-checked before use.
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

struct Peer : PrivateHeapObject {
  uint32_t slot = 0;
  uint32_t incarnation = 0;
  pid_t pid = 0;
  bool self = false;
  uint8_t* base = nullptr;
  uint64_t size = 0;
  const ProcSlot* proc = nullptr;

  bool alive() const { return self || proc_alive(*proc); }
  bool contains(uint64_t off, uint64_t len) const { return off <= size && len <= size - off; }
  template <typename T>
  T* at(uint64_t off) const {
    return contains(off, sizeof(T)) ? reinterpret_cast<T*>(base + off) : nullptr;
  }
  const ArenaHeader* header() const { return reinterpret_cast<const ArenaHeader*>(base); }
};

class PeerTable {
 public:
  PeerTable(Registry& registry, Arena& own_arena, uint32_t own_slot);

  // The live process that owns registry `slot`, mapped; nullptr if none
  // (never claimed, or its owner died).
  const Peer* get(uint32_t slot);

  // A write end of the peer's doorbell `index`, opened on first use;
  // -1 when the doorbell is gone (closed, or its owner died).
  int doorbell_fd(const Peer& peer, uint32_t index, uint32_t gen);

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
  };
  PrivateMap<std::tuple<uint32_t, uint32_t, uint32_t>, OpenBell> bells_;
};

}  // namespace sv::shm
