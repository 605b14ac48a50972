// Multicast for UD QPs (ibv_attach_mcast / ibv_detach_mcast): membership is
// host-wide, in the registry; a UD send to a multicast GID with remote QPN
// 0xffffff reaches every attached QP of the host.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <vector>

#include "shm/layout.h"

namespace sv {

struct Qp;

int attach_mcast(Qp* qp, const ibv_gid& gid, uint16_t lid);
int detach_mcast(Qp* qp, const ibv_gid& gid, uint16_t lid);

// The QPNs attached to `gid` right now.
std::vector<uint32_t> mcast_members(const shm::RegistryHeader& reg, const ibv_gid& gid);

}  // namespace sv
