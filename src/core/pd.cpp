#include "core/limit_reached.h"
#include "core/pd.h"

#include <cerrno>

#include "core/handles.h"
#include "core/lid.h"
#include "core/device_profile.h"
#include "core/faults.h"
#include "core/limits.h"
#include "util/knobs.h"
#include "util/log.h"

namespace sv {
namespace {
std::atomic<uint32_t> g_next_pd_id{1};
std::atomic<uint32_t> g_pd_count{0};  // PDs of the process (max_pd is the device's)
}

Pd* alloc_pd(Context* ctx) {
  if (int e = faults::call(faults::Call::kAllocPd)) {
    errno = e;
    return nullptr;
  }
  if (g_pd_count.fetch_add(1) >= device_profile().max_pd) {
    g_pd_count.fetch_sub(1);
    limit_reached(Limit::kPds, device_profile().max_pd);
    errno = ENOMEM;
    return nullptr;
  }
  auto* pd = new Pd();
  pd->context = ctx->ibv();
  pd->ctx = ctx;
  pd->id = g_next_pd_id.fetch_add(1);
  pd->handle = pd->id;
  pd->serial = handles::publish(handles::Kind::kPd, pd->handle, pd);
  return pd;
}

// Through any of its structs: the PD goes (as the kernel's object does), and
// the struct with it; the PD's other structs can then only be unimported.
int dealloc_pd(Pd* pd) {
  if (pd->users().load() != 0) {
    SV_INFO("dealloc_pd: %d objects still use the PD", pd->users().load());
    return EBUSY;
  }
  if (!handles::retire(handles::Kind::kPd, pd->handle, pd->serial)) {
    SV_INFO("dealloc_pd: PD %u was deallocated through another of its structs", pd->handle);
    return EINVAL;
  }
  g_pd_count.fetch_sub(1);
  delete pd;
  return 0;
}

Pd* import_pd(Context* ctx, uint32_t handle) {
  auto* pd = new Pd();
  bool found = handles::visit(handles::Kind::kPd, handle, [&](void* owner, uint64_t serial) {
    const Pd* original = static_cast<const Pd*>(owner);
    pd->id = original->id;
    pd->uses = original->uses;
    pd->serial = serial;
  });
  if (!found) {
    delete pd;
    errno = EINVAL;
    return nullptr;
  }
  pd->context = ctx->ibv();
  pd->ctx = ctx;
  pd->handle = handle;
  pd->imported = true;
  return pd;
}

// Frees the struct only. Objects made on it point at it, so while the PD
// has users the struct stays (a few bytes, until the process ends).
void unimport_pd(Pd* pd) {
  if (!pd->imported) return;  // an original goes with ibv_dealloc_pd
  if (pd->users().load() == 0) delete pd;
}

int check_ah_attr(Context* ctx, const ibv_ah_attr& attr) {
  if (attr.port_num != 1) return EINVAL;
  if (attr.static_rate > IBV_RATE_800_GBPS) return EINVAL;
  // RoCE carries every packet in UDP/IP: an address without a GRH has no
  // destination IP, so the kernel refuses it too. An IB port routes by LID.
  if (!attr.is_global) return knobs().infiniband && attr.dlid >= 1 && attr.dlid <= kMaxUnicastLid ? 0 : EINVAL;
  GidEntry sgid;
  if (!ctx->gid_at(attr.grh.sgid_index, &sgid)) return EINVAL;
  if (gid_is_zero(attr.grh.dgid)) return EINVAL;
  return 0;
}

Destination resolve_destination(Context* ctx, const ibv_ah_attr& attr) {
  Destination d;
  if (knobs().infiniband) d.slid = ctx->lid();
  if (!attr.is_global) {
    // InfiniBand mode, LID only: the host the LID stands for (core/lid.h),
    // from our GID 0. A LID no host has goes nowhere (retries, then an error).
    d.sl = attr.sl;
    GidEntry sgid;
    if (ctx->gid_at(0, &sgid)) d.sgid = sgid.gid;
    if (ctx->gid_of_lid(attr.dlid, &d.dgid)) d.route = ctx->transport_for(d.dgid);
    return d;
  }
  d.dgid = attr.grh.dgid;
  d.sgid_index = attr.grh.sgid_index;
  d.hop_limit = attr.grh.hop_limit;
  d.traffic_class = attr.grh.traffic_class;
  d.flow_label = attr.grh.flow_label;
  d.sl = attr.sl;
  GidEntry sgid;
  if (ctx->gid_at(attr.grh.sgid_index, &sgid)) d.sgid = sgid.gid;
  d.route = ctx->transport_for(d.dgid);
  return d;
}

Ah* create_ah(Pd* pd, const ibv_ah_attr& attr) {
  if (int e = faults::call(faults::Call::kCreateAh)) {
    errno = e;
    return nullptr;
  }
  if (int e = check_ah_attr(pd->ctx, attr)) {
    errno = e;
    return nullptr;
  }
  if (device_profile().max_ah == 0) {  // (a profile of a device without address handles: siw, iWARP)
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (pd->ctx->ah_count.fetch_add(1) >= device_profile().max_ah) {
    pd->ctx->ah_count.fetch_sub(1);
    limit_reached(Limit::kAhs, device_profile().max_ah);
    errno = ENOMEM;
    return nullptr;
  }
  auto* ah = new Ah();
  ah->context = pd->context;
  ah->pd = pd;
  ah->attr = attr;
  ah->dest = resolve_destination(pd->ctx, attr);
  pd->users().fetch_add(1);
  return ah;
}

int destroy_ah(Ah* ah) {
  Pd* pd = Pd::from(ah->pd);
  pd->users().fetch_sub(1);
  pd->ctx->ah_count.fetch_sub(1);
  delete ah;
  return 0;
}

}  // namespace sv
