// What a connected (RC/UC) QP's requester remembers about its responder
// between messages, as a NIC keeps per-connection state: where the target
// QP is, and a read-ahead of its receive queue. Transports fill and use it;
// it is only ever a shortcut: every use re-checks that the target's owner
// is the same live process and that the QP still has its number.
#pragma once

#include <cstdint>

#include "core/recv_queue.h"
#include "shm/layout.h"
#include "shm/peers.h"

namespace sv {

struct Connection {
  // The target QP, as last found. `proc` is the owner's registry slot (never
  // unmapped); `owner` is valid while that slot keeps `owner_incarnation`.
  const shm::ProcSlot* proc = nullptr;
  uint32_t owner_incarnation = 0;
  const shm::Peer* owner = nullptr;
  shm::QpShared* target = nullptr;
  RecvAhead ahead;

  void forget() { *this = Connection{}; }
};

}  // namespace sv
