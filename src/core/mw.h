// Memory windows (ibv_alloc_mw, binding, invalidation). A window takes an
// entry of the MR table, so its rkey is found and checked by the responder
// exactly as an MR's is; while bound, the entry holds the geometry of the
// part of the MR it grants, and shm::mw_word() says it is a window (of which
// type, over which MR, and for type 2 through which QP).
//
//  * Type 1: bound with ibv_bind_mw (a BIND_MW work request the library
//    posts, with the next rkey); any QP of its PD may use it; rebinding
//    replaces the binding, length 0 unbinds.
//  * Type 2 (2B): bound with a BIND_MW work request that names the new rkey
//    (only its low 8 bits may change); remote access only through the QP
//    that bound it; invalidated by LOCAL_INV or by a peer's SEND_WITH_INV,
//    and only then bound again.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>

#include "core/pd.h"
#include "shm/layout.h"
#include "shm/peers.h"
#include "util/private_heap.h"

namespace sv {

struct Qp;
struct SendWqe;

struct Mw : ibv_mw, PrivateHeapObject {
  Pd* pd_obj = nullptr;
  uint32_t index = 0;  // in the MR table
  static Mw* from(ibv_mw* m) { return static_cast<Mw*>(m); }
};

Mw* alloc_mw(Pd* pd, ibv_mw_type type);  // nullptr + errno
int dealloc_mw(Mw* mw);                  // 0 or an errno

// ibv_bind_mw (type 1): checks, posts the BIND_MW work request with the next
// rkey and gives the window that rkey. 0 or an errno.
int bind_mw_type1(Qp* qp, Mw* mw, const ibv_mw_bind& bind);

// What the requester does for BIND_MW and LOCAL_INV work requests: their
// completion status (IBV_WC_MW_BIND_ERR, IBV_WC_LOC_QP_OP_ERR on failure).
ibv_wc_status execute_bind(Qp* qp, const SendWqe& w);
ibv_wc_status execute_local_invalidate(Qp* qp, uint32_t rkey);

// SEND_WITH_INV at the responder: whether `rkey` names a valid type 2
// window of `owner`, of PD `pd`, bound to QP `qpn`; then invalidating it.
bool may_remote_invalidate(const shm::Peer& owner, uint32_t qpn, uint32_t pd, uint32_t rkey);
bool remote_invalidate(const shm::Peer& owner, uint32_t rkey);

// Whether windows are bound to MR `mr_index` of this process (ibv_dereg_mr
// is then EBUSY).
bool windows_bound_to(shm::Host& host, uint32_t mr_index);

}  // namespace sv
