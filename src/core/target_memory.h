// Reaching bytes of an MR that belongs to `owner` (possibly this process):
// directly for our own memory, through the arena overlay for overlaid MRs,
// and with process_vm_readv/writev for the rest.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/mr.h"
#include "shm/peers.h"

namespace sv {

// `addr` is an iova-space address inside `mr` (the caller checked bounds).
bool write_to_mr(const shm::Peer& owner, const MrView& mr, uint64_t addr, const void* src, size_t len);
bool read_from_mr(const shm::Peer& owner, const MrView& mr, uint64_t addr, void* dst, size_t len);

}  // namespace sv
