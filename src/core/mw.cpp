#include "core/limit_reached.h"
#include "core/limits.h"
#include "core/mw.h"

#include <atomic>
#include <cerrno>

#include "core/device_profile.h"
#include "core/mr.h"
#include "core/qp.h"

namespace sv {
namespace {

// Windows allocated in this process: ibv_dereg_mr scans for bound ones only
// when there are any.
std::atomic<int> g_windows{0};

constexpr unsigned kWindowAccess = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;

shm::MrEntry& entry_of(Mw* mw) { return mw->pd_obj->ctx->host->arena().mr_table()[mw->index]; }

// The MR table entry of `rkey` in `owner`'s arena, or nullptr.
shm::MrEntry* peer_entry(const shm::Peer& owner, uint32_t rkey) {
  uint32_t idx = shm::key_index(rkey);
  // (Whose key it is, its users check: the entry's key is the whole key.)
  if (idx == 0 || idx >= shm::kMaxMrs) return nullptr;
  return owner.at<shm::MrEntry>(owner.header()->mr_table + uint64_t{idx} * sizeof(shm::MrEntry));
}

}  // namespace

Mw* alloc_mw(Pd* pd, ibv_mw_type type) {
  if (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2) {
    errno = EINVAL;
    return nullptr;
  }
  // A profile of a device without windows (siw): none, as its provider
  // has no alloc_mw; one with fewer: as many.
  if (device_profile().max_mw == 0) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (static_cast<uint64_t>(g_windows.load(std::memory_order_relaxed)) >= device_profile().max_mw) {
    limit_reached(Limit::kMws, device_profile().max_mw);
    errno = ENOMEM;
    return nullptr;
  }
  shm::Host& host = *pd->ctx->host;
  int64_t idx = host.arena().take_mr_index();
  if (idx < 0) {
    name_limit_reached(host.arena().mr_names_ran_out(), Limit::kMrKeys, limits::kMaxMr);
    errno = ENOMEM;
    return nullptr;
  }
  auto* mw = new Mw();
  mw->context = pd->context;
  mw->pd = pd;
  mw->pd_obj = pd;
  mw->type = type;
  mw->index = static_cast<uint32_t>(idx);
  mw->handle = mw->index;
  // Not valid until bound: the entry's key stays 0.
  mw->rkey = host.arena().key_of(mw->index);
  pd->users().fetch_add(1);
  g_windows.fetch_add(1);
  return mw;
}

int dealloc_mw(Mw* mw) {
  entry_of(mw).key.store(0, std::memory_order_release);
  mw->pd_obj->ctx->host->arena().give_mr_index(mw->index);
  mw->pd_obj->users().fetch_sub(1);
  g_windows.fetch_sub(1);
  delete mw;
  return 0;
}

int bind_mw_type1(Qp* qp, Mw* mw, const ibv_mw_bind& bind) {
  const ibv_mw_bind_info& b = bind.bind_info;
  if (mw->type != IBV_MW_TYPE_1) return EINVAL;  // type 2 windows bind with a work request
  if (!b.mr && (b.addr || b.length)) return EINVAL;
  if (b.mw_access_flags & IBV_ACCESS_ZERO_BASED) return EINVAL;
  if (b.mr && b.mr->pd != mw->pd) return EPERM;
  ibv_send_wr wr{};
  wr.wr_id = bind.wr_id;
  wr.send_flags = bind.send_flags;
  wr.opcode = IBV_WR_BIND_MW;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
  wr.bind_mw.bind_info = b;
  ibv_send_wr* bad = nullptr;
  if (int rc = post_send(qp, &wr, &bad)) return rc;
  mw->rkey = wr.bind_mw.rkey;
  return 0;
}

// The bind rules of the IBA (C10-72..75, o10-36.2.x, o10-37.2.x), as rxe's
// rxe_check_bind_mw applies them; any failure is IBV_WC_MW_BIND_ERR.
ibv_wc_status execute_bind(Qp* qp, const SendWqe& w) {
  auto* mw = reinterpret_cast<Mw*>(w.compare_add);
  auto* mr = reinterpret_cast<Mr*>(w.swap);
  shm::Host& host = *qp->ctx->host;
  shm::MrEntry& e = host.arena().mr_table()[mw->index];
  // Only the remote rights and zero-basing mean anything for a window. Other
  // bits (LOCAL_WRITE, as programs pass the MR's access word) are ignored,
  // as rxe and mlx5 ignore them.
  const unsigned access = w.imm & kWindowAccess;
  const bool zero_based = w.imm & IBV_ACCESS_ZERO_BASED;
  if (mw->pd_obj != qp->pd_obj || (w.rkey >> 8) != (mw->rkey >> 8))
    return IBV_WC_MW_BIND_ERR;
  if (mw->type == IBV_MW_TYPE_2) {
    // Bound once, then invalidated before it binds again (o10-37.2.30); it
    // cannot be unbound by binding nothing (o10-37.2.40).
    if (e.key.load(std::memory_order_acquire) != 0 || !mr || w.length == 0) return IBV_WC_MW_BIND_ERR;
  } else {
    if (zero_based) return IBV_WC_MW_BIND_ERR;  // o10-36.2.2
    if (!mr || w.length == 0) {                 // zero length (or no MR) unbinds a type 1 window
      e.key.store(0, std::memory_order_release);
      return IBV_WC_SUCCESS;
    }
  }
  MrView v;
  if (!read_mr(host.arena().mr_table(), mr->lkey, &v) || v.mw || v.pd != qp->pd_obj->id ||
      (v.access & IBV_ACCESS_ZERO_BASED) ||  // windows bind to virtually addressed MRs only
      !(v.access & IBV_ACCESS_MW_BIND) ||    // C10-73
      !v.covers(w.remote_addr, w.length) ||  // C10-75
      // C10-74: a window that lets peers write needs an MR the HCA may write.
      ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(v.access & IBV_ACCESS_LOCAL_WRITE)))
    return IBV_WC_MW_BIND_ERR;
  // The old rkey (type 1 rebinding) dies before the entry changes.
  e.key.store(0, std::memory_order_release);
  e.pd = v.pd;
  e.access = access | (v.access & IBV_ACCESS_LOCAL_WRITE);
  e.path = v.path;
  // A zero-based window's addresses start at 0 at the bound address.
  e.iova = zero_based ? 0 : w.remote_addr;
  e.length = w.length;
  e.vaddr = v.owner_vaddr(w.remote_addr);
  e.overlay_off = v.overlay_off;
  e.overlay_page = v.overlay_page;
  e.mw = shm::mw_word(mw->type, mr->index, mw->type == IBV_MW_TYPE_2 ? qp->qp_base.qp_num : 0);
  e.key.store(w.rkey, std::memory_order_release);
  return IBV_WC_SUCCESS;
}

ibv_wc_status execute_local_invalidate(Qp* qp, uint32_t rkey) {
  shm::Host& host = *qp->ctx->host;
  uint32_t idx = shm::key_index(rkey);
  if (idx == 0 || idx >= shm::kMaxMrs) return IBV_WC_LOC_QP_OP_ERR;  // (then the entry's whole key decides)
  shm::MrEntry& e = host.arena().mr_table()[idx];
  // Only a bound type 2 window of the QP's PD (this device has no
  // fast-registration MRs, the other thing LOCAL_INV applies to).
  if (e.key.load(std::memory_order_acquire) != rkey || shm::mw_type(e.mw) != IBV_MW_TYPE_2 ||
      e.pd != qp->pd_obj->id)
    return IBV_WC_LOC_QP_OP_ERR;
  uint32_t expected = rkey;
  return e.key.compare_exchange_strong(expected, 0, std::memory_order_acq_rel) ? IBV_WC_SUCCESS
                                                                               : IBV_WC_LOC_QP_OP_ERR;
}

bool may_remote_invalidate(const shm::Peer& owner, uint32_t qpn, uint32_t pd, uint32_t rkey) {
  const shm::MrEntry* table = owner.at<shm::MrEntry>(owner.header()->mr_table);
  MrView v;
  if (!peer_entry(owner, rkey) || !table || !read_mr(table, rkey, &v)) return false;
  return shm::mw_type(v.mw) == IBV_MW_TYPE_2 && shm::mw_qpn(v.mw) == (qpn & 0xffffff) && v.pd == pd;
}

bool remote_invalidate(const shm::Peer& owner, uint32_t rkey) {
  shm::MrEntry* e = peer_entry(owner, rkey);
  uint32_t expected = rkey;
  return e && e->key.compare_exchange_strong(expected, 0, std::memory_order_acq_rel);
}

bool windows_bound_to(shm::Host& host, uint32_t mr_index) {
  if (g_windows.load(std::memory_order_relaxed) == 0) return false;
  const shm::MrEntry* table = host.arena().mr_table();
  for (uint32_t i = 1; i < shm::kMaxMrs; ++i) {
    const shm::MrEntry& e = table[i];
    if (e.mw && e.key.load(std::memory_order_acquire) != 0 && shm::mw_mr_index(e.mw) == mr_index) return true;
  }
  return false;
}

}  // namespace sv
