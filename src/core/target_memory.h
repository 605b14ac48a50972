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

// An RDMA atomic (compare-and-swap or fetch-and-add) on the 8 aligned bytes
// at `addr`; `original` receives the value before the operation. Memory in
// a shared mapping (our own, or overlaid) uses CPU atomics; memory reached
// with process_vm_* is updated under the host's atomic lock for its address.
bool atomic_on_mr(const shm::Peer& owner, shm::RegistryHeader& registry, const MrView& mr, uint64_t addr,
                  ibv_wr_opcode op, uint64_t compare_add, uint64_t swap, uint64_t* original);

}  // namespace sv
