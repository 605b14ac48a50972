// LIDs for the InfiniBand link-layer mode (SOFTVERBS_LINK_LAYER=infiniband).
//
// Some software addresses peers by LID only: Open MPI's openib BTL moves its
// RC QPs to RTR with `is_global = 0, dlid = <peer's LID>` (its UD connection
// manager refuses Ethernet ports), and IB programs such as ibv_rc_pingpong
// without -g do the same. On that port every packet still travels as
// RoCEv2 (the host's IP addresses are the GIDs), so a LID must name a host:
// there is no subnet manager, and the LID is made from the host's address,
// the last 16 bits of its first IPv4 address (its GID 0), which the other
// hosts of one IPv4 /16 read back the same way. A host with only loopback
// has LID 1.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <span>
#include <vector>

#include "core/gid_table.h"

namespace sv {

// Unicast LIDs are 1..0xBFFF; 0xC000.. are multicast, 0xFFFF permissive.
inline constexpr uint16_t kMaxUnicastLid = 0xBFFF;

// The port's LID for this GID table: the last 16 bits of the first IPv4
// GID of a real interface; 1 when there is none, or when those bits are no
// unicast LID (x.y.0.0 or x.y.192.0 and above: logged once).
uint16_t host_lid(std::span<const GidEntry> gids);

// The GID a LID stands for, seen from a host with table `gids`: its own
// GID 0 for its own LID, else the IPv4 address of its /16 that ends in the
// LID. False when there is no IPv4 address to complete it, or the LID is
// not unicast.
bool gid_of_lid(uint16_t lid, std::span<const GidEntry> gids, ibv_gid* out);

// The LID of the host that has `gid` (what a receive completion reports as
// slid): `own_lid` for one of `gids`, the last 16 bits of an IPv4-mapped
// GID, else 0.
uint16_t lid_of_gid(const ibv_gid& gid, std::span<const GidEntry> gids, uint16_t own_lid);

}  // namespace sv
