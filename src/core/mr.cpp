#include "core/mr.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstdint>

#include "core/bounce_path.h"
#include "core/dm.h"
#include "core/handles.h"
#include "core/check.h"
#include "core/device_profile.h"
#include "core/faults.h"
#include "core/limits.h"
#include "core/limit_reached.h"
#include "core/object_budget.h"
#include "core/qp.h"
#include "core/mw.h"
#include "core/pinned_pages.h"
#include "core/transport.h"
#include "util/bits.h"
#include "util/knobs.h"
#include "util/log.h"
#include "util/vma_query.h"

namespace sv {

namespace {
ObjectBudget g_mr_budget;  // MRs of the process (max_mr is the profile's)
}  // namespace

namespace {

constexpr uint64_t kPageSize = 4096;
// madvise(2) advice of Linux 5.14 (not yet in every libc's headers).
constexpr int kMadvPopulateRead = 22;
constexpr int kMadvPopulateWrite = 23;

constexpr unsigned kKnownAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                                  IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED |
                                  IBV_ACCESS_ON_DEMAND | IBV_ACCESS_HUGETLB;
constexpr unsigned kWriteAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;

int check_access(unsigned access) {
  // Bits in the optional range are hints a device may ignore (as we do).
  unsigned required = access & ~static_cast<unsigned>(IBV_ACCESS_OPTIONAL_RANGE);
  if (required & ~kKnownAccess) return EINVAL;
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE))
    return EINVAL;
  if (access & IBV_ACCESS_ZERO_BASED) return EOPNOTSUPP;  // only device memory MRs are zero-based
  // A device without on-demand paging (its profile's): the kernel refuses
  // the flag, EOPNOTSUPP (ib_check_mr_access).
  if ((access & IBV_ACCESS_ON_DEMAND) && !device_profile().odp) return EOPNOTSUPP;
  return 0;
}

bool on_demand(unsigned access) { return access & IBV_ACCESS_ON_DEMAND; }

// The implicit on-demand MR: every address of the process.
bool implicit_odp(const void* addr, size_t length, unsigned access) {
  return on_demand(access) && addr == nullptr && length == SIZE_MAX;
}

// The kernel pins the pages of an MR; it fails with EFAULT when they are not
// mapped, or not writable while write access is asked for. (The kernel is
// asked about this range alone: util/vma_query.h.)
int check_memory(uint64_t addr, uint64_t length, unsigned access) {
  uint64_t at = addr, end = addr + length;
  std::vector<MapEntry> maps = mappings_over(at, end, /*with_names=*/false);
  for (const MapEntry& e : maps) {
    if (e.end <= at || e.start >= end) continue;
    if (e.start > at) return EFAULT;
    if (!e.read && !e.write) return EFAULT;
    if ((access & kWriteAccess) && !e.write) return EFAULT;
    at = e.end;
    if (at >= end) return 0;
  }
  return at >= end ? 0 : EFAULT;
}

void publish(shm::MrEntry& e, uint32_t key, const Mr& mr, uint64_t vaddr, uint32_t path, uint64_t overlay_off,
             uint64_t overlay_page) {
  e.pd = mr.pd_obj->id;
  e.access = mr.access;
  e.path = path;
  e.iova = mr.iova;
  e.length = mr.length;
  e.vaddr = vaddr;
  e.overlay_off = overlay_off;
  e.overlay_page = overlay_page;
  e.mw = 0;
  e.key.store(key, std::memory_order_release);
}

// Faults in the pages of a registration, as the kernel's pinning does
// (ib_umem_get: get_user_pages, for writing when the MR may be written):
// a device then places data into memory that is there. Left to fault on
// first use, each page of a receive ring costs the process that places a
// message there a page fault on the data path, tens of microseconds on a
// virtual machine: an MPI ping-pong between two hosts ran its first ~4000
// messages at twice its latency while UCX's receive buffers were touched
// for the first time (perf: ~24000 faults in write_to_mr). Best effort: a
// kernel without MADV_POPULATE_* (before 5.14), or a mapping it will not
// populate, leaves the pages to fault in as before.
//
// An overlaid MR's pages have a second mapping, in our view of the arena
// (`arena_view`, where the overlay that begins at `overlay_page` is seen
// there): the one our own transports place data through (target_memory.h).
// On a virtual machine whose hypervisor shadows the guest's page tables,
// a page's first access through each mapping costs an exit of its own
// even once the guest mapped it (~8 us a page here, populated or not). An
// overlaid MR's pages are our arena's: each is touched through both
// mappings, with an atomic add of 0 where the MR may be written (no
// thread's concurrent store is lost) and a load where not; they are not
// published yet, so no placement races with it. (A shared mapping's pages,
// reached directly, are not written: that would dirty a file's pages.)
void touch_pages(uint8_t* from, uint64_t bytes, bool write) {
  // (A byte each, within the registered bytes: the page's own bytes
  // before them may be another object's, a sanitizer's redzone.)
  const uint64_t begin = reinterpret_cast<uint64_t>(from), end = begin + bytes;
  for (uint64_t at = begin; at < end; at = align_down(at, kPageSize) + kPageSize) {
    auto* byte = reinterpret_cast<uint8_t*>(at);
    if (write)
      __atomic_fetch_add(byte, 0, __ATOMIC_RELAXED);
    else
      (void)__atomic_load_n(byte, __ATOMIC_RELAXED);
  }
}

void populate(const Mr& mr, uint8_t* arena_view = nullptr, uint64_t overlay_page = 0) {
  const uint64_t start = align_down(reinterpret_cast<uint64_t>(mr.addr), kPageSize);
  const uint64_t end = align_up(reinterpret_cast<uint64_t>(mr.addr) + mr.length, kPageSize);
  const bool write = mr.access & kWriteAccess;
  const int advice = write ? kMadvPopulateWrite : kMadvPopulateRead;
  if (madvise(reinterpret_cast<void*>(start), end - start, advice) != 0 || !arena_view) return;
  uint8_t* view = arena_view + (start - overlay_page);
  if (madvise(view, end - start, advice) != 0) return;
  const uint64_t lead = reinterpret_cast<uint64_t>(mr.addr) - start;  // (the MR's offset in its first page)
  touch_pages(static_cast<uint8_t*>(mr.addr), mr.length, write);
  touch_pages(view + lead, mr.length, write);
}

// Chooses how peers reach [addr, addr+len) and publishes the entry.
void place_and_publish(Mr& mr, shm::Host& host, uint32_t key) {
  uint64_t addr = reinterpret_cast<uint64_t>(mr.addr);
  shm::MrEntry& e = host.arena().mr_table()[mr.index];
  if (on_demand(mr.access)) {
    // Pages come and go with the application's mappings: never overlaid.
    host.allow_cross_memory_attach();
    start_bounce_service(host);
    host.overlays().hold_direct(addr, mr.length);
    mr.direct = true;
    publish(e, key, mr, addr, shm::kMrOdp, 0, 0);
    return;
  }
  if (knobs().mem_path != MemPath::kCma && knobs().mem_path != MemPath::kBounce) {
    if (auto pin = host.overlays().pin(addr, mr.length)) {
      mr.pinned = true;
      mr.pin_page = pin->page;
      populate(mr, host.arena().base() + pin->arena_off, pin->page);
      publish(e, key, mr, addr, shm::kMrOverlay, pin->arena_off, pin->page);
      return;
    }
  }
  // Peers reach it with process_vm_readv/writev, or through our bounce
  // service where those calls are denied to them: both must be ready before
  // the key is published.
  host.allow_cross_memory_attach();
  start_bounce_service(host);
  host.overlays().hold_direct(addr, mr.length);
  mr.direct = true;
  populate(mr);
  publish(e, key, mr, addr, shm::kMrCma, 0, 0);
}

// Undoes place_and_publish's hold on the pages (overlay pin or direct hold).
void unpin(Mr& mr, shm::Host& host) {
  if (mr.pinned) host.overlays().unpin(mr.pin_page);
  if (mr.direct) host.overlays().release_direct(reinterpret_cast<uint64_t>(mr.addr), mr.length);
  mr.pinned = mr.direct = false;
}

}  // namespace


Mr* reg_mr(Pd* pd, void* addr, size_t length, uint64_t iova, unsigned access) {
  if (int e = faults::call(faults::Call::kRegMr)) {
    errno = e;
    return nullptr;
  }
  if (int err = check_access(access)) {
    errno = err;
    return nullptr;
  }
  const bool implicit = implicit_odp(addr, length, access);
  if (length == 0 || (length > device_profile().max_mr_size && !implicit)) {
    errno = EINVAL;
    return nullptr;
  }
  uint64_t a = reinterpret_cast<uint64_t>(addr);
  if (!implicit && (a + length < a || iova + length < iova)) {
    errno = EINVAL;
    return nullptr;
  }
  if (implicit && iova != 0) {  // the implicit MR's addresses are the process's own
    errno = EINVAL;
    return nullptr;
  }
  if (int err = on_demand(access) ? 0 : check_memory(a, length, access)) {
    SV_INFO("reg_mr: [%p, +%zu) is not mapped %s", addr, length, err == EFAULT ? "with the access asked" : "");
    errno = err;
    return nullptr;
  }
  const uint64_t charge = on_demand(access) ? 0 : pages_spanned(a, length);
  if (!charge_pinned_pages(charge)) {
    errno = ENOMEM;
    return nullptr;
  }
  shm::Host& host = *pd->ctx->host;
  if (!g_mr_budget.take(device_profile().max_mr)) {
    limit_reached(Limit::kMrs, device_profile().max_mr);
    uncharge_pinned_pages(charge);
    errno = ENOMEM;  // (the profile's max_mr)
    return nullptr;
  }
  int64_t idx = host.arena().take_mr_index();
  if (idx < 0) {
    g_mr_budget.give();
    name_limit_reached(host.arena().mr_names_ran_out(), Limit::kMrKeys, limits::kMaxMr);
    uncharge_pinned_pages(charge);
    errno = ENOMEM;
    return nullptr;
  }
  auto* mr = new Mr();
  mr->charged_pages = charge;
  mr->context = pd->context;
  mr->pd = pd;
  mr->pd_obj = pd;
  mr->addr = addr;
  mr->length = length;
  mr->index = static_cast<uint32_t>(idx);
  mr->access = access;
  mr->iova = iova;
  uint32_t key = host.arena().key_of(mr->index);
  mr->lkey = mr->rkey = key;
  mr->handle = mr->index;
  place_and_publish(*mr, host, key);
  pd->users().fetch_add(1);
  mr->serial = handles::publish(handles::Kind::kMr, mr->handle, mr);
  if (check::on()) check::g_live_mrs.fetch_add(1, std::memory_order_relaxed);
  return mr;
}

// Messages a transport answers later may still be reading the MR's memory
// in place (Transport::answers_later): they take a copy before it goes, as
// a device's DMA would have read the pinned pages.
static void release_for_network(const Mr& mr) {
  mr.pd_obj->ctx->for_each_transport([](Transport& t) { t.copy_app_buffers(); });
}

int rereg_mr(Mr* mr, int flags, Pd* pd, void* addr, size_t length, unsigned access) {
  if (flags & ~IBV_REREG_MR_FLAGS_SUPPORTED || !flags) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  if (mr->imported) {  // the resources are the original's: re-register through it
    errno = EOPNOTSUPP;
    return IBV_REREG_MR_ERR_INPUT;
  }
  unsigned new_access = (flags & IBV_REREG_MR_CHANGE_ACCESS) ? access : mr->access;
  Pd* new_pd = (flags & IBV_REREG_MR_CHANGE_PD) ? pd : mr->pd_obj;
  void* new_addr = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? addr : mr->addr;
  size_t new_len = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) ? length : mr->length;
  if (!new_pd || new_pd->ctx != mr->pd_obj->ctx) {
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  if (int err = check_access(new_access)) {
    errno = err;
    return IBV_REREG_MR_ERR_INPUT;
  }
  if (new_len == 0 || new_len > device_profile().max_mr_size || mr->dm ||
      implicit_odp(mr->addr, mr->length, mr->access)) {  // device memory and implicit ODP MRs stay as they are
    errno = EINVAL;
    return IBV_REREG_MR_ERR_INPUT;
  }
  if (int err = on_demand(new_access) ? 0 : check_memory(reinterpret_cast<uint64_t>(new_addr), new_len, new_access)) {
    errno = err;
    return IBV_REREG_MR_ERR_CMD;
  }
  // New pages are charged before the old are let go (the kernel takes the
  // new umem first): a move past RLIMIT_MEMLOCK fails and leaves the MR be.
  const bool moves = (flags & IBV_REREG_MR_CHANGE_TRANSLATION) || on_demand(new_access) != on_demand(mr->access);
  const uint64_t new_charge = on_demand(new_access) ? 0 : pages_spanned(reinterpret_cast<uint64_t>(new_addr), new_len);
  if (moves && !charge_pinned_pages(new_charge)) {
    errno = ENOMEM;
    return IBV_REREG_MR_ERR_CMD;
  }
  if (moves) {
    uncharge_pinned_pages(mr->charged_pages);
    mr->charged_pages = new_charge;
  }
  shm::Host& host = *mr->pd_obj->ctx->host;
  shm::MrEntry& e = host.arena().mr_table()[mr->index];
  // The key is withdrawn while the entry changes, so no peer uses a
  // half-updated entry, and comes back the same: mlx5 re-registers in place
  // (UMR) and rxe too, keeping lkey and rkey, and programs written against
  // them (rdma-core's test_mr_rereg_*) go on using the keys they hold.
  const uint32_t key = mr->lkey;
  e.key.store(0, std::memory_order_release);
  release_for_network(*mr);
  unpin(*mr, host);
  if (new_pd != mr->pd_obj) {
    mr->pd_obj->users().fetch_sub(1);
    new_pd->users().fetch_add(1);
  }
  mr->pd = new_pd;
  mr->pd_obj = new_pd;
  mr->access = new_access;
  if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
    mr->addr = new_addr;
    mr->length = new_len;
    mr->iova = reinterpret_cast<uint64_t>(new_addr);
  }
  place_and_publish(*mr, host, key);
  return 0;
}

namespace {

// SOFTVERBS_CHECK's mr-in-use (core/check.h): a work request posted and not
// yet completed names the MR being deregistered. (QPs are gathered under
// objects_mu, then looked at one by one under their sq_mu, as
// handle_qp_attention does.)
void check_mr_in_use(const Mr* mr) {
  Context* ctx = mr->pd_obj->ctx;
  std::vector<Qp*> qps;
  {
    std::lock_guard g(ctx->objects_mu);
    for (auto& [qpn, qp] : ctx->qps) qps.push_back(qp);
  }
  for (Qp* qp : qps) {
    std::lock_guard g(qp->sq_mu);
    for (uint64_t pos = qp->sq_exec; pos != qp->sq_tail; ++pos) {
      const SendWqe& w = qp->slot(pos);
      const ibv_sge* sges = qp->sges(pos);
      for (uint32_t i = 0; i < w.num_sge; ++i)
        if (sges[i].lkey == mr->lkey) {
          check::report("mr-in-use",
                        "ibv_dereg_mr(lkey %#x): work request %lu of QP %#x (wr_id %#lx), posted and not yet "
                        "completed, names it: on a device it then completes with a protection error, or "
                        "reads memory that is no longer the MR's",
                        mr->lkey, static_cast<unsigned long>(pos), qp->qp_base.qp_num,
                        static_cast<unsigned long>(w.wr_id));
          return;
        }
    }
  }
}

}  // namespace

int dereg_mr(Mr* mr) {
  if (check::on()) check_mr_in_use(mr);
  shm::Host& host = *mr->pd_obj->ctx->host;
  if (windows_bound_to(host, mr->handle)) return EBUSY;  // as the man page says: unbind them first
  // The struct that owns the resources: this one, or the original of an import.
  auto* owner = static_cast<Mr*>(handles::retire(handles::Kind::kMr, mr->handle, mr->serial));
  if (!owner) {
    SV_INFO("dereg_mr: MR %u was deregistered through another of its structs", mr->handle);
    return EINVAL;
  }
  host.arena().mr_table()[owner->index].key.store(0, std::memory_order_release);
  release_for_network(*owner);
  unpin(*owner, host);
  uncharge_pinned_pages(owner->charged_pages);
  owner->charged_pages = 0;
  if (owner->dm) owner->dm->mr_uses->fetch_sub(1);
  host.arena().give_mr_index(owner->index);
  if (!owner->dm) g_mr_budget.give();  // (device memory MRs are not counted)
  owner->pd_obj->users().fetch_sub(1);
  if (check::on()) check::g_live_mrs.fetch_sub(1, std::memory_order_relaxed);
  // An original deregistered through an import stays, stale, for its own
  // ibv_dereg_mr to answer EINVAL (the application still holds it).
  delete mr;
  return 0;
}

Mr* import_mr(Pd* pd, uint32_t handle) {
  auto* mr = new Mr();
  uint32_t pd_id = 0;
  bool found = handles::visit(handles::Kind::kMr, handle, [&](void* owner, uint64_t serial) {
    const Mr* original = static_cast<const Mr*>(owner);
    mr->addr = original->addr;
    mr->length = original->length;
    mr->lkey = original->lkey;
    mr->rkey = original->rkey;
    mr->index = original->index;
    mr->access = original->access;
    mr->iova = original->iova;
    mr->serial = serial;
    pd_id = original->pd_obj->id;
  });
  if (!found || pd_id != pd->id) {
    SV_INFO("import_mr: %s", found ? "the MR is of another PD" : "no live MR has this handle");
    delete mr;
    errno = EINVAL;
    return nullptr;
  }
  mr->context = pd->context;
  mr->pd = pd;
  mr->pd_obj = pd;
  mr->handle = handle;
  mr->imported = true;
  return mr;
}

void unimport_mr(Mr* mr) {
  if (mr->imported) delete mr;  // an original goes with ibv_dereg_mr
}

Mr* reg_dm_mr(Pd* pd, Dm* dm, uint64_t dm_offset, size_t length, unsigned access) {
  // Device memory MRs are zero-based: work requests address them from 0.
  // Length 0 is an MR that grants nothing, as mlx5 registers it.
  const unsigned plain = access & ~static_cast<unsigned>(IBV_ACCESS_ZERO_BASED);
  if (!(access & IBV_ACCESS_ZERO_BASED) || on_demand(access) || check_access(plain) ||
      dm_offset > dm->length || length > dm->length - dm_offset) {
    errno = EINVAL;
    return nullptr;
  }
  shm::Host& host = *pd->ctx->host;
  int64_t idx = host.arena().take_mr_index();
  if (idx < 0) {
    errno = ENOMEM;
    return nullptr;
  }
  auto* mr = new Mr();
  mr->context = pd->context;
  mr->pd = pd;
  mr->pd_obj = pd;
  mr->addr = nullptr;
  mr->length = length;
  mr->index = static_cast<uint32_t>(idx);
  mr->access = access;
  mr->iova = 0;
  mr->dm = dm;
  uint32_t key = host.arena().key_of(mr->index);
  mr->lkey = mr->rkey = key;
  mr->handle = mr->index;
  // The memory is an arena block: peers reach it as they reach an overlay.
  uint8_t* at = dm->base + dm_offset;
  publish(host.arena().mr_table()[mr->index], key, *mr, reinterpret_cast<uint64_t>(at), shm::kMrOverlay,
          static_cast<uint64_t>(at - host.arena().base()), reinterpret_cast<uint64_t>(at));
  dm->mr_uses->fetch_add(1);
  pd->users().fetch_add(1);
  mr->serial = handles::publish(handles::Kind::kMr, mr->handle, mr);
  return mr;
}

int advise_mr(Pd* pd, ibv_advise_mr_advice advice, uint32_t flags, const ibv_sge* sg, uint32_t num_sge) {
  if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
      advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT)
    return EINVAL;
  if ((flags & ~static_cast<uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) || !sg || num_sge == 0) return EINVAL;
  shm::Host& host = *pd->ctx->host;
  const shm::MrEntry* table = host.arena().mr_table();
  const bool write = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE;
  for (uint32_t i = 0; i < num_sge; ++i) {
    MrView v;
    if (!read_mr(table, sg[i].lkey, &v) || v.pd != pd->id ||
        !v.covers(sg[i].addr, sg[i].length) || (write && !(v.access & IBV_ACCESS_LOCAL_WRITE)) || v.mw)
      return EFAULT;
    if (v.path != shm::kMrOdp) return EINVAL;  // advice is for on-demand MRs
  }
  if (advice == IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) return 0;  // nothing to fault in ahead
  // Prefetch: fault the pages in now, as a NIC's page-fault handler would.
  // (With FLUSH or without, the call returns when that is done.)
  for (uint32_t i = 0; i < num_sge; ++i) {
    if (!sg[i].length) continue;
    uint64_t first = align_down(sg[i].addr, kPageSize), end = align_up(sg[i].addr + sg[i].length, kPageSize);
    if (madvise(reinterpret_cast<void*>(first), end - first, write ? kMadvPopulateWrite : kMadvPopulateRead) == 0)
      continue;
    if (errno == ENOMEM || errno == EFAULT) return EFAULT;  // not (or not so) mapped
    madvise(reinterpret_cast<void*>(first), end - first, MADV_WILLNEED);  // an older kernel: a hint only
  }
  return 0;
}

}  // namespace sv
