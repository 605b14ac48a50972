// Multicast groups on a UD rdma_cm_id: rdma_join_multicast(_ex) and
// rdma_leave_multicast. The group's MGID is the RoCE mapping of the IP
// address (IPv4 as ::ffff:a.b.c.d); joining attaches the id's QP
// (ibv_attach_mcast), so delivery reaches every attached UD QP on the
// host, and joins the IP group on the id's link, so that what other hosts
// send to the group arrives too. A send-only join does neither: that
// member only sends.
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstring>

#include "c_boundary.h"
#include "cm_address.h"
#include "cm_device.h"
#include "cm_state.h"

using namespace sv::rdmacm;

namespace {

constexpr uint32_t kMulticastQpn = 0xffffff;

bool same_address(const sockaddr* a, const sockaddr* b) {
  sockaddr_storage na = normalized(a), nb = normalized(b);
  return std::memcmp(&na, &nb, address_length(reinterpret_cast<sockaddr*>(&na))) == 0;
}

int join(rdma_cm_id* cm_id, const sockaddr* addr, uint32_t flags, void* context) {
  CmLock lock(cm_mutex());
  Id* id = id_of(cm_id);
  if (cm_id->qp_type != IBV_QPT_UD || !cm_id->verbs) return fail(EINVAL);
  if (!address_is_multicast(addr)) return fail(EINVAL);
  if (flags != RDMA_MC_JOIN_FLAG_FULLMEMBER && flags != RDMA_MC_JOIN_FLAG_SENDONLY_FULLMEMBER)
    return fail(EINVAL);
  for (const Multicast& mc : id->multicasts)
    if (same_address(reinterpret_cast<const sockaddr*>(&mc.addr), addr)) return fail(EADDRINUSE);

  Multicast mc;
  std::memcpy(&mc.addr, addr, address_length(addr));
  sockaddr_storage norm = normalized(addr);
  mc.mgid = address_to_gid(reinterpret_cast<sockaddr*>(&norm));
  mc.context = context;
  if (cm_id->qp && flags == RDMA_MC_JOIN_FLAG_FULLMEMBER) {
    sockaddr_storage local = normalized(&cm_id->route.addr.src_addr);
    // An id whose source address no interface has (bound to a wildcard)
    // has no link to join on: the group then reaches this host's members only.
    int rc = mc.membership.join(reinterpret_cast<sockaddr*>(&norm), reinterpret_cast<sockaddr*>(&local));
    if (rc && rc != EADDRNOTAVAIL) return fail(rc);
    if ((rc = ibv_attach_mcast(cm_id->qp, &mc.mgid, 0))) return fail(rc);
    mc.attached = true;
  }
  id->multicasts.push_back(std::move(mc));

  Event* ev = queue_event(id, RDMA_CM_EVENT_MULTICAST_JOIN, 0);
  auto& ud = ev->pub.param.ud;
  ud.private_data = context;  // rdma-core hands the join's context back here
  ud.ah_attr.is_global = 1;
  ud.ah_attr.grh.dgid = mc.mgid;
  ud.ah_attr.grh.sgid_index = static_cast<uint8_t>(id->gid_index);
  ud.ah_attr.grh.hop_limit = 1;
  ud.ah_attr.grh.traffic_class = id->tos;
  ud.ah_attr.port_num = cm_id->port_num ? cm_id->port_num : 1;
  ud.qp_num = kMulticastQpn;
  ud.qkey = id->qkey;
  lock.unlock();
  return complete_sync(id);
}

}  // namespace

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_join_multicast(struct rdma_cm_id* id,
                                                           struct sockaddr* addr, void* context) {
  if (!id || !addr) return fail(EINVAL);
  return guarded(-1, [&] { return join(id, addr, RDMA_MC_JOIN_FLAG_FULLMEMBER, context); });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_join_multicast_ex(
    struct rdma_cm_id* id, struct rdma_cm_join_mc_attr_ex* attr, void* context) {
  if (!id || !attr) return fail(EINVAL);
  const uint32_t needed = RDMA_CM_JOIN_MC_ATTR_ADDRESS | RDMA_CM_JOIN_MC_ATTR_JOIN_FLAGS;
  if ((attr->comp_mask & needed) != needed || (attr->comp_mask & ~needed) || !attr->addr)
    return fail(EINVAL);
  return guarded(-1, [&] { return join(id, attr->addr, attr->join_flags, context); });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_leave_multicast(struct rdma_cm_id* cm_id,
                                                            struct sockaddr* addr) {
  if (!cm_id || !addr) return fail(EINVAL);
  CmLock lock(cm_mutex());
  Id* id = id_of(cm_id);
  for (auto it = id->multicasts.begin(); it != id->multicasts.end(); ++it) {
    if (!same_address(reinterpret_cast<const sockaddr*>(&it->addr), addr)) continue;
    if (it->attached && cm_id->qp) ibv_detach_mcast(cm_id->qp, &it->mgid, 0);
    id->multicasts.erase(it);
    return 0;
  }
  return fail(EADDRNOTAVAIL);
}
