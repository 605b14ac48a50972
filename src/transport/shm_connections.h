// What the intra-host transport remembers of a connected (RC, UC, XRC send)
// QP's responder between messages, as a NIC keeps per-connection state:
// where the target QP is, and a read-ahead of its receive queue. It is only
// ever a shortcut: every use re-checks that the target's owner is the same
// live process and that the QP still has its number.
//
// One entry per local QP, by the QP table index of its number. An entry is
// opened (and emptied) when the QP becomes ready to send, emptied when it is
// reset or destroyed, and only then used by the QP's own sends, all of
// which hold the QP's send-queue lock: entries need no lock of their own.
// Entries live as long as the transport, so a stale pointer never dangles.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>

#include "core/recv_queue.h"
#include "shm/layout.h"
#include "shm/peers.h"
#include "util/private_heap.h"

namespace sv {

struct ShmConnection : PrivateHeapObject {
  // The target QP, as last found. `proc` is the owner's registry slot (never
  // unmapped); `owner` is valid while that slot keeps `owner_incarnation`.
  const shm::ProcSlot* proc = nullptr;
  uint32_t owner_incarnation = 0;
  const shm::Peer* owner = nullptr;
  shm::QpShared* target = nullptr;
  RecvAhead ahead;

  void forget() { *this = ShmConnection{}; }
};

class ShmConnections {
 public:
  ShmConnections() = default;
  ShmConnections(const ShmConnections&) = delete;
  ShmConnections& operator=(const ShmConnections&) = delete;
  ~ShmConnections();

  // QP `qpn` (ours) is about to send: its entry, emptied (allocated on first use).
  void open(uint32_t qpn);
  // The QP's entry, if it was opened; else null (UD, or never sent).
  ShmConnection* find(uint32_t qpn) const {
    const uint32_t i = shm::qpn_index(qpn);
    Chunk* c = chunks_[i / kChunk].load(std::memory_order_acquire);
    return c ? c->entries[i % kChunk].load(std::memory_order_acquire) : nullptr;
  }
  // The QP is reset or destroyed: what its entry held is forgotten.
  void forget(uint32_t qpn) {
    if (ShmConnection* c = find(qpn)) c->forget();
  }

 private:
  // Two levels, so that a process with few QPs spends a few KiB: the index
  // space (shm::kMaxQps) is 64 Ki.
  static constexpr uint32_t kChunk = 256;
  struct Chunk : PrivateHeapObject {
    std::atomic<ShmConnection*> entries[kChunk] = {};
  };
  std::atomic<Chunk*> chunks_[shm::kMaxQps / kChunk] = {};
  std::mutex grow_mu_;  // open() allocating a chunk or an entry
};

}  // namespace sv
