// The bounce path: how a peer reaches registered memory that is neither
// overlaid (shared with it) nor open to process_vm_readv/writev, because a
// seccomp profile or a ptrace policy denies those calls (containers often
// do), or because SOFTVERBS_MEM_PATH=bounce asks for it. The owner of the
// memory runs a bounce thread, started with its first such registration and
// asleep on a doorbell while nobody needs it; a peer copies the bytes
// through a staging buffer in its own arena and the owner's thread copies
// them into or out of the registered memory (layout: shm::BounceShared).
#pragma once

#include <cstdint>

#include "shm/host.h"
#include "shm/layout.h"
#include "shm/peers.h"

namespace sv {

// Starts this process's bounce thread, once (again in a fork child). After
// it returns, peers can reach our non-overlaid registrations through it.
void start_bounce_service(shm::Host& host);

// Copies `len` bytes between `buf` and the owner's registered memory (MR
// `key`, iova `addr`): into it for kBounceWrite, out of it for kBounceRead.
// False when the owner has no bounce service, refuses the request (the key
// does not cover the range with the access needed) or dies meanwhile.
bool bounce_copy(const shm::Peer& owner, shm::BounceOp op, uint32_t key, uint64_t addr, void* buf,
                 uint64_t len);

}  // namespace sv
