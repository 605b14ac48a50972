#include "core/gid_table.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <tuple>

#include "core/device_attr.h"
#include "net/roce_frame.h"
#include "util/kernel_socket.h"

namespace sv {

namespace {

// A RoCEv2 GID is an IPv6 address: the wire codec's address rules apply.
const in6_addr& as_address(const ibv_gid& g) { return *reinterpret_cast<const in6_addr*>(g.raw); }

}  // namespace

bool gid_is_ipv4_mapped(const ibv_gid& gid) { return net::is_v4_mapped(as_address(gid)); }

bool gid_equal(const ibv_gid& a, const ibv_gid& b) { return std::memcmp(a.raw, b.raw, 16) == 0; }

bool gid_is_zero(const ibv_gid& g) {
  static const ibv_gid kZero = {};
  return gid_equal(g, kZero);
}

bool gid_is_multicast(const ibv_gid& g) { return net::is_multicast(as_address(g)); }

bool gid_is_loopback(const ibv_gid& g) {
  return (gid_is_ipv4_mapped(g) && g.raw[12] == 127) || IN6_IS_ADDR_LOOPBACK(&as_address(g));
}

std::string gid_to_string(const ibv_gid& gid) {
  char buf[INET6_ADDRSTRLEN];
  inet_ntop(AF_INET6, gid.raw, buf, sizeof buf);
  return buf;
}

namespace {

// The MTU of interface `name` (SIOCGIFMTU on any socket); 0 when unknown.
int interface_mtu(int fd, const char* name) {
  if (fd < 0) return 0;
  ifreq req{};
  std::strncpy(req.ifr_name, name, IFNAMSIZ - 1);
  return ioctl(fd, SIOCGIFMTU, &req) == 0 ? req.ifr_mtu : 0;
}

// The link speed of interface `name` in Mb/s (ETHTOOL_GSET, which needs
// no privilege); 0 when unknown or not an Ethernet link's (loopback).
int interface_speed_mbps(int fd, const char* name) {
  if (fd < 0) return 0;
  ethtool_cmd cmd{};
  cmd.cmd = ETHTOOL_GSET;
  ifreq req{};
  std::strncpy(req.ifr_name, name, IFNAMSIZ - 1);
  req.ifr_data = reinterpret_cast<char*>(&cmd);
  if (ioctl(fd, SIOCETHTOOL, &req) != 0) return 0;
  const uint32_t mbps = ethtool_cmd_speed(&cmd);
  return mbps == static_cast<uint32_t>(SPEED_UNKNOWN) || mbps > INT32_MAX ? 0 : static_cast<int>(mbps);
}

}  // namespace

std::optional<PrivateVector<GidEntry>> try_read_gid_table() {
  PrivateVector<GidEntry> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return std::nullopt;
  // (The MTUs need a socket too: without it every link would read as
  // unknown, and the port's active MTU would change with nothing changed.)
  const int fd = kernel_socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeifaddrs(list);
    return std::nullopt;
  }
  for (ifaddrs* ifa = list; ifa; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || !(ifa->ifa_flags & IFF_UP)) continue;
    GidEntry e{};
    if (ifa->ifa_addr->sa_family == AF_INET) {
      auto* sin = reinterpret_cast<sockaddr_in*>(ifa->ifa_addr);
      e.gid.raw[10] = e.gid.raw[11] = 0xff;
      std::memcpy(e.gid.raw + 12, &sin->sin_addr, 4);
    } else if (ifa->ifa_addr->sa_family == AF_INET6) {
      auto* sin6 = reinterpret_cast<sockaddr_in6*>(ifa->ifa_addr);
      std::memcpy(e.gid.raw, &sin6->sin6_addr, 16);
    } else {
      continue;
    }
    e.ifindex = if_nametoindex(ifa->ifa_name);
    e.ifname = ifa->ifa_name;
    e.loopback = ifa->ifa_flags & IFF_LOOPBACK;
    e.link_mtu = interface_mtu(fd, ifa->ifa_name);
    e.link_speed_mbps = e.loopback ? 0 : interface_speed_mbps(fd, ifa->ifa_name);
    out.push_back(std::move(e));
  }
  close(fd);
  freeifaddrs(list);
  // Loopback last: a NIC's table holds its link's addresses only, and
  // middleware takes the first GID of the kind it prefers as the one to
  // give its peers (UCX: the first RoCEv2 IPv4 GID; libfabric's datagram
  // endpoints and Open MPI: GID 0). With 127.0.0.1 first, peers on other
  // hosts were handed an address that means themselves.
  auto key = [](const GidEntry& e) {
    return std::make_tuple(e.loopback, e.ifindex, !gid_is_ipv4_mapped(e.gid),
                           std::string(reinterpret_cast<const char*>(e.gid.raw), 16));
  };
  std::sort(out.begin(), out.end(), [&](const GidEntry& a, const GidEntry& b) { return key(a) < key(b); });
  out.erase(std::unique(out.begin(), out.end(),
                        [](const GidEntry& a, const GidEntry& b) { return gid_equal(a.gid, b.gid); }),
            out.end());
  if (out.size() > 128) out.resize(128);
  return out;
}

PrivateVector<GidEntry> read_gid_table() { return try_read_gid_table().value_or(PrivateVector<GidEntry>{}); }

ibv_mtu port_active_mtu(std::span<const GidEntry> gids) {
  for (const GidEntry& e : gids)
    if (!e.loopback) return e.link_mtu > 0 ? ib_mtu_for_link(e.link_mtu) : IBV_MTU_1024;
  return IBV_MTU_4096;
}

PortRate port_rate_for_link(int mbps) {
  // (ibv_port_attr's codes: verbs.h names none; ibv_devinfo and the kernel's
  // ib_verbs.h do.)
  constexpr uint8_t IBV_WIDTH_1X = 1, IBV_WIDTH_4X = 2;
  constexpr uint8_t IBV_SPEED_SDR = 1, IBV_SPEED_DDR = 2, IBV_SPEED_FDR10 = 8, IBV_SPEED_EDR = 32;
  if (mbps <= 0) return {};
  if (mbps <= 1000) return {IBV_WIDTH_1X, IBV_SPEED_SDR};
  if (mbps <= 10000) return {IBV_WIDTH_1X, IBV_SPEED_FDR10};
  if (mbps <= 20000) return {IBV_WIDTH_4X, IBV_SPEED_DDR};
  if (mbps <= 25000) return {IBV_WIDTH_1X, IBV_SPEED_EDR};
  if (mbps <= 40000) return {IBV_WIDTH_4X, IBV_SPEED_FDR10};
  return {IBV_WIDTH_4X, IBV_SPEED_EDR};
}

PortRate port_link_rate(std::span<const GidEntry> gids) {
  for (const GidEntry& e : gids)
    if (!e.loopback) return port_rate_for_link(e.link_speed_mbps);
  return {};
}

}  // namespace sv
