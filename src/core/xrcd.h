// XRC domains (ibv_open_xrcd / ibv_close_xrcd). A domain is host-wide: the
// processes that open it through the same file (its inode) share it, as
// with the kernel, and its SRQs receive what arrives at any XRC_RECV QP of
// the domain. The table of domains lives in the registry (shm::XrcdTable).
#pragma once

#include <infiniband/verbs.h>

#include <atomic>
#include <cstdint>

#include "core/context.h"
#include "util/private_heap.h"

namespace sv {

struct Xrcd : ibv_xrcd, PrivateHeapObject {
  Context* ctx = nullptr;
  uint32_t index = 0;       // in the registry's table
  uint64_t id = 0;          // shm::xrcd_id(), what SRQs and QPs carry
  std::atomic<int> users{0};  // XRC SRQs and QPs of ours: close fails with EBUSY
  static Xrcd* from(ibv_xrcd* x) { return static_cast<Xrcd*>(x); }
  ibv_xrcd* ibv() { return this; }
};

// As ibv_open_xrcd(3): with a file (fd) the domain of that inode, created
// only with O_CREAT, refused with O_EXCL when it exists (EINVAL, as the
// kernel answers both); fd -1 opens a new anonymous domain.
Xrcd* open_xrcd(Context* ctx, const ibv_xrcd_init_attr& attr);  // nullptr + errno
int close_xrcd(Xrcd* xrcd);                                        // 0 or an errno

}  // namespace sv
