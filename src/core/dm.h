// Device memory (ibv_alloc_dm): on a NIC, memory on the card that the host
// reaches with ibv_memcpy_to_dm / from_dm and that QPs reach through a
// zero-based MR (ibv_reg_dm_mr). Here it is a block of this process's
// arena, so peers reach a DM MR as they reach an overlaid one: with plain
// loads and stores. At most limits::kMaxDmSize bytes per process at a time.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <memory>

#include "core/context.h"
#include "util/private_heap.h"

namespace sv {

struct Dm : ibv_dm, PrivateHeapObject {
  Context* ctx = nullptr;
  uint64_t arena_off = 0;  // of the block (aligned within it as asked)
  uint64_t block_len = 0;
  uint8_t* base = nullptr;  // the DM's first byte, in our mapping of the arena
  uint64_t length = 0;
  // MRs on it, through whichever of its structs: free fails with EBUSY.
  std::shared_ptr<std::atomic<int>> mr_uses = make_private_shared<std::atomic<int>>(0);
  bool imported = false;  // made by ibv_import_dm
  uint64_t serial = 0;    // the life of the DM (core/handles.h)
  static Dm* from(ibv_dm* d) { return static_cast<Dm*>(d); }
};

Dm* alloc_dm(Context* ctx, const ibv_alloc_dm_attr& attr);  // nullptr + errno
// Through any struct of the DM (the original or an import): the DM goes.
int free_dm(Dm* dm);                                         // 0 or an errno
// ibv_import_dm: another struct for the live DM `handle`; nullptr + errno.
Dm* import_dm(Context* ctx, uint32_t handle);
void unimport_dm(Dm* dm);

}  // namespace sv
