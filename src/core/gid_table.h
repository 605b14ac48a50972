// The port's GID table, built from the addresses of the host's (or network
// namespace's) interfaces: RoCEv2 GIDs only, IPv4 as ::ffff:a.b.c.d.
// Order: interfaces other than loopback first, then by interface index,
// IPv4 before IPv6, address; so GID 0 is the first IPv4 address of the
// first real interface (UCX, libfabric and Open MPI hand GID 0, or the
// first RoCEv2 IPv4 GID, to their peers), and ::ffff:127.0.0.1 comes first
// only where loopback is the only interface up.
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "util/private_heap.h"

namespace sv {

struct GidEntry {
  ibv_gid gid;
  uint32_t ifindex;
  std::string ifname;
  int link_mtu;   // the interface's MTU in bytes (0: unknown)
  int link_speed_mbps;  // its link speed as ethtool reports it, Mb/s (0: unknown, as a virtio NIC's)
  bool loopback;  // IFF_LOOPBACK
};

// The host's addresses as a GID table; nullopt when they cannot be read
// (getifaddrs needs a netlink socket: a process at its RLIMIT_NOFILE, or the
// kernel out of memory). A failed read says nothing about the addresses, so
// a cache keeps what it had rather than take it for an empty table.
std::optional<PrivateVector<GidEntry>> try_read_gid_table();
// The same, empty when the addresses cannot be read.
PrivateVector<GidEntry> read_gid_table();

// The port's active MTU for a GID table: the IB MTU (ib_mtu_for_link) of the
// interface that carries the first GID not on a loopback interface, as rxe
// follows its netdev; IBV_MTU_4096 when only loopback has addresses (the
// shared-memory path has no link to fit).
ibv_mtu port_active_mtu(std::span<const GidEntry> gids);

// A port's width and speed (ibv_port_attr's IBV_WIDTH_* and IBV_SPEED_*
// codes).
struct PortRate {
  uint8_t width = 0, speed = 0;  // 0: unknown
};
// The rate rxe reports for a netdev of `mbps` (the kernel's
// ib_get_eth_speed, Linux 6.1: 10 GbE is 1X FDR10, 25 GbE 1X EDR, 100 GbE
// 4X EDR).
PortRate port_rate_for_link(int mbps);
// The port's rate for a GID table, as rxe follows its netdev: that of the
// link of the interface that carries the first GID not on a loopback
// interface (the one port_active_mtu follows). Unknown when only loopback
// has addresses, or that link's speed is unknown (a virtio NIC's; rxe
// then says 1 Gb/s): the profile's own then.
PortRate port_link_rate(std::span<const GidEntry> gids);

bool gid_is_ipv4_mapped(const ibv_gid& gid);
bool gid_equal(const ibv_gid& a, const ibv_gid& b);
bool gid_is_zero(const ibv_gid& g);
// IPv6 multicast (ff00::/8), or IPv4 multicast as ::ffff:224.0.0.0/4.
bool gid_is_multicast(const ibv_gid& g);
// A loopback address: ::1, or IPv4 127.0.0.0/8 as ::ffff:127.x.y.z.
bool gid_is_loopback(const ibv_gid& g);
std::string gid_to_string(const ibv_gid& gid);

}  // namespace sv
