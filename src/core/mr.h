// Memory regions. Each MR is published in this process's shared MR table
// (shm/layout.h MrEntry) so that a peer delivering a message can check an
// lkey/rkey and find the bytes without asking us.
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>
#include <optional>

#include "core/pd.h"
#include "shm/layout.h"
#include "util/private_heap.h"

namespace sv {

struct Mr : ibv_mr, PrivateHeapObject {
  Pd* pd_obj = nullptr;
  uint32_t index = 0;
  uint32_t access = 0;
  uint64_t iova = 0;
  bool pinned = false;     // holds an overlay pin (shm/overlay.h)
  bool direct = false;     // reached without an overlay: holds its pages from overlays (hold_direct)
  uint64_t pin_page = 0;
  uint64_t charged_pages = 0;  // against RLIMIT_MEMLOCK (core/pinned_pages.h)
  struct Dm* dm = nullptr;  // ibv_reg_dm_mr: the device memory it maps
  bool imported = false;    // made by ibv_import_mr: the resources are the original's
  uint64_t serial = 0;      // the life of the MR (core/handles.h)
  static Mr* from(ibv_mr* m) { return static_cast<Mr*>(m); }
};

// nullptr + errno (EINVAL bad flags/length, EFAULT unmapped or read-only
// memory with write access, EOPNOTSUPP zero-based, ENOMEM: no MR index, or
// past RLIMIT_MEMLOCK without CAP_IPC_LOCK, as the kernel). With
// IBV_ACCESS_ON_DEMAND nothing is checked or pinned: the MR follows the
// application's mappings; (NULL, SIZE_MAX) is the implicit ODP MR of the
// whole address space.
Mr* reg_mr(Pd* pd, void* addr, size_t length, uint64_t iova, unsigned access);
// ibv_reg_dm_mr: a zero-based MR over [dm_offset, +length) of `dm`.
Mr* reg_dm_mr(Pd* pd, struct Dm* dm, uint64_t dm_offset, size_t length, unsigned access);
// ibv_advise_mr: 0 or an errno (EINVAL, EFAULT as its man page says).
int advise_mr(Pd* pd, ibv_advise_mr_advice advice, uint32_t flags, const ibv_sge* sg, uint32_t num_sge);
// Returns 0 or an ibv_rereg_mr_err_code (and sets errno).
int rereg_mr(Mr* mr, int flags, Pd* pd, void* addr, size_t length, unsigned access);
// Through any struct of the MR (the original or an import): the MR goes.
int dereg_mr(Mr* mr);
// ibv_import_mr: another struct for the live MR `handle`, whose PD must be
// `pd`'s; nullptr + errno.
Mr* import_mr(Pd* pd, uint32_t handle);
void unimport_mr(Mr* mr);

// A consistent copy of a published MR entry. No member initializers: it
// lives on the stack of every message and read_mr() sets every field.
struct MrView {
  uint32_t key, pd, access, path;
  uint64_t iova, length, vaddr, overlay_off, overlay_page;
  uint64_t mw;  // 0: an MR; else a memory window (shm::mw_word)

  bool covers(uint64_t addr, uint64_t len) const {
    return addr >= iova && len <= length && addr - iova <= length - len;
  }
  // Owner's virtual address of `addr` (an iova-space address).
  uint64_t owner_vaddr(uint64_t addr) const { return vaddr + (addr - iova); }
  // An overlaid MR's bytes at `addr` in a mapping of its owner's arena
  // (`arena`, `arena_size` bytes), or nullptr. Through the owner's own
  // arena mapping this is the NIC's view of pinned pages: the same memory
  // as the application's buffer, there until the MR is deregistered even if
  // the application unmaps the buffer first.
  uint8_t* overlay_at(uint8_t* arena, uint64_t arena_size, uint64_t addr, uint64_t len) const {
    const uint64_t off = overlay_offset(addr);
    return off && off <= arena_size && len <= arena_size - off ? arena + off : nullptr;
  }
  // The arena offset of `addr` of an overlaid MR; 0 when not overlaid (no
  // overlay begins at offset 0: the arena's header is there).
  uint64_t overlay_offset(uint64_t addr) const {
    const uint64_t v = owner_vaddr(addr);
    if (path != shm::kMrOverlay || v < overlay_page) return 0;
    return overlay_off + (v - overlay_page);
  }
};

// Reads the entry for `key` from an MR table (ours or a peer's) into `out`.
// False if no live MR has this key. (An out-parameter: this is on every
// message's path, and returning the view by value showed in profiles.)
inline bool read_mr(const shm::MrEntry* table, uint32_t key, MrView* out) {
  uint32_t idx = shm::key_index(key);
  if (idx == 0 || idx >= shm::kMaxMrs) return false;
  const shm::MrEntry& e = table[idx];
  if (e.key.load(std::memory_order_acquire) != key) return false;
  *out = MrView{key, e.pd, e.access, e.path, e.iova, e.length, e.vaddr, e.overlay_off, e.overlay_page, e.mw};
  std::atomic_thread_fence(std::memory_order_acquire);
  // Re-check: the owner may have deregistered (and reused) the entry while
  // we copied it.
  return e.key.load(std::memory_order_relaxed) == key;
}

}  // namespace sv
