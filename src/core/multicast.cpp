#include "core/multicast.h"

#include <cerrno>
#include <cstring>

#include "core/gid_table.h"
#include "core/qp.h"
#include "shm/robust_mutex.h"

namespace sv {
namespace {

shm::McastGroup* find_group(shm::McastTable& t, const ibv_gid& gid) {
  for (shm::McastGroup& g : t.groups)
    if (gid_equal(g.gid, gid)) return &g;
  return nullptr;
}

bool group_empty(const shm::McastGroup& g) {
  for (const auto& m : g.members)
    if (m.load(std::memory_order_relaxed)) return false;
  return true;
}

// Members whose process died without detaching are forgotten.
void drop_dead_members(shm::RegistryHeader& reg, shm::McastGroup& g) {
  for (auto& m : g.members) {
    uint32_t qpn = m.load(std::memory_order_relaxed);
    if (qpn && !shm::proc_alive(reg.procs[shm::block_owner(reg.qpn_blocks, shm::qpn_block(qpn))])) m.store(0, std::memory_order_release);
  }
}

}  // namespace

int attach_mcast(Qp* qp, const ibv_gid& gid, uint16_t) {
  if (qp->type != IBV_QPT_UD || !gid_is_multicast(gid)) return EINVAL;
  shm::RegistryHeader& reg = *qp->ctx->host->registry().header();
  uint32_t qpn = qp->qp_base.qp_num;
  shm::RobustLock lock(&reg.mcast.lock);
  shm::McastGroup* g = find_group(reg.mcast, gid);
  if (!g) {
    for (shm::McastGroup& candidate : reg.mcast.groups) {
      drop_dead_members(reg, candidate);
      if (group_empty(candidate)) {
        g = &candidate;
        break;
      }
    }
    if (!g) return ENOMEM;  // max_mcast_grp groups in use
    g->gid = gid;
  }
  drop_dead_members(reg, *g);
  for (auto& m : g->members)
    if (m.load(std::memory_order_relaxed) == qpn) return 0;  // already attached
  for (auto& m : g->members) {
    if (m.load(std::memory_order_relaxed) == 0) {
      m.store(qpn, std::memory_order_release);
      qp->mcast_groups.fetch_add(1);
      return 0;
    }
  }
  return ENOMEM;  // max_mcast_qp_attach members
}

int detach_mcast(Qp* qp, const ibv_gid& gid, uint16_t) {
  if (qp->type != IBV_QPT_UD || !gid_is_multicast(gid)) return EINVAL;
  shm::RegistryHeader& reg = *qp->ctx->host->registry().header();
  uint32_t qpn = qp->qp_base.qp_num;
  shm::RobustLock lock(&reg.mcast.lock);
  shm::McastGroup* g = find_group(reg.mcast, gid);
  if (g) {
    for (auto& m : g->members) {
      if (m.load(std::memory_order_relaxed) == qpn) {
        m.store(0, std::memory_order_release);
        if (qp->mcast_groups.load() > 0) qp->mcast_groups.fetch_sub(1);
        return 0;
      }
    }
  }
  return EINVAL;  // not attached
}

std::vector<uint32_t> mcast_members(const shm::RegistryHeader& reg, const ibv_gid& gid) {
  std::vector<uint32_t> out;
  for (const shm::McastGroup& g : reg.mcast.groups) {
    if (!gid_equal(g.gid, gid)) continue;
    for (const auto& m : g.members)
      if (uint32_t qpn = m.load(std::memory_order_acquire)) out.push_back(qpn);
  }
  return out;
}

}  // namespace sv
