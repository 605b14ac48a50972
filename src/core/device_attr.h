// The attributes ibv_query_device(_ex) and ibv_query_port report, derived
// from limits.h so they always describe what the verbs really accept.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <span>
#include <vector>

#include "core/gid_table.h"

namespace sv {

void fill_device_attr(ibv_device_attr* attr);
void fill_device_attr_ex(ibv_device_attr_ex* attr);
// Port 1 for a GID table snapshot: ACTIVE while it holds a GID, the active
// MTU of its link (port_active_mtu, as rxe's); an Ethernet (RoCE) port, or
// with SOFTVERBS_LINK_LAYER=infiniband an InfiniBand one with the host's
// LID (core/lid.h).
void fill_port_attr(ibv_port_attr* attr, std::span<const GidEntry> gids);

// The IB MTU rxe gives a port on a network device of MTU `link_mtu` bytes
// (rxe_set_mtu: eth_mtu_int_to_enum, then at most 4096): the largest of
// 256..4096 that still fits once RXE_MAX_HDR_LENGTH (80 bytes: IP, UDP, BTH
// and the largest extension headers) is taken off; 256 when none does.
// 1500 -> IBV_MTU_1024, 9000 and loopback's 65536 -> IBV_MTU_4096.
ibv_mtu ib_mtu_for_link(int link_mtu);
inline uint32_t ib_mtu_bytes(ibv_mtu m) { return 128u << m; }

// "softverbs 0.1.0": the firmware version string.
const char* firmware_version();

}  // namespace sv
