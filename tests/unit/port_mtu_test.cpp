// The port's active MTU follows the link, as Linux rxe's does: rxe_set_mtu()
// takes the netdev's MTU, subtracts RXE_MAX_HDR_LENGTH (80) and rounds down
// to an IB MTU (ib_mtu_int_to_enum), at most 4096 and at least 256.
#include <gtest/gtest.h>

#include <vector>

#include "core/device_attr.h"
#include "core/gid_table.h"

namespace sv {
namespace {

TEST(PortMtu, LinkMtuMapsAsRxe) {
  struct Case {
    int link;
    ibv_mtu ib;
  } cases[] = {
      {1500, IBV_MTU_1024},   // Ethernet: rxe on a 1500-byte link reports active_mtu 1024 (3)
      {9000, IBV_MTU_4096},   // jumbo frames
      {65536, IBV_MTU_4096},  // loopback
      {1280, IBV_MTU_1024},   // IPv6's minimum: 1200 bytes of room
      {1400, IBV_MTU_1024},
      {4176, IBV_MTU_4096},   // exactly 4096 + 80
      {4175, IBV_MTU_2048},
      {2128, IBV_MTU_2048},   // 2048 + 80
      {2127, IBV_MTU_1024},
      {1104, IBV_MTU_1024},   // 1024 + 80
      {1103, IBV_MTU_512},
      {592, IBV_MTU_512},     // 512 + 80
      {591, IBV_MTU_256},
      {576, IBV_MTU_256},
      {68, IBV_MTU_256},      // IPv4's minimum: rxe still says 256
      {0, IBV_MTU_256},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.link);
    EXPECT_EQ(ib_mtu_for_link(c.link), c.ib);
  }
  EXPECT_EQ(ib_mtu_bytes(IBV_MTU_256), 256u);
  EXPECT_EQ(ib_mtu_bytes(IBV_MTU_1024), 1024u);
  EXPECT_EQ(ib_mtu_bytes(IBV_MTU_4096), 4096u);
}

GidEntry entry(uint32_t ifindex, const char* name, int mtu, bool loopback) {
  GidEntry e{};
  e.gid.raw[10] = e.gid.raw[11] = 0xff;
  e.gid.raw[12] = static_cast<uint8_t>(ifindex);
  e.ifindex = ifindex;
  e.ifname = name;
  e.link_mtu = mtu;
  e.loopback = loopback;
  return e;
}

TEST(PortMtu, FirstNetworkInterfaceSetsThePortMtu) {
  // Only loopback: intra-host traffic has no link to fit, max_mtu it is.
  EXPECT_EQ(port_active_mtu(std::vector<GidEntry>{entry(1, "lo", 65536, true)}), IBV_MTU_4096);
  EXPECT_EQ(port_active_mtu(std::vector<GidEntry>{}), IBV_MTU_4096);
  // lo first (ifindex 1), then a 1500-byte link: the link's.
  EXPECT_EQ(port_active_mtu(std::vector<GidEntry>{entry(1, "lo", 65536, true), entry(2, "eth0", 1500, false)}), IBV_MTU_1024);
  // The first GID not on loopback decides, not the largest or smallest link.
  EXPECT_EQ(port_active_mtu(std::vector<GidEntry>{entry(1, "lo", 65536, true), entry(2, "eth0", 9000, false),
                             entry(3, "eth1", 1500, false)}),
            IBV_MTU_4096);
  EXPECT_EQ(port_active_mtu(std::vector<GidEntry>{entry(1, "lo", 65536, true), entry(2, "eth0", 1100, false),
                             entry(3, "eth1", 9000, false)}),
            IBV_MTU_512);
  // An interface whose MTU could not be read: 1024, as for an unknown route.
  EXPECT_EQ(port_active_mtu(std::vector<GidEntry>{entry(1, "lo", 65536, true), entry(2, "eth0", 0, false)}), IBV_MTU_1024);
}

TEST(PortMtu, GidTableCarriesEachInterfacesMtu) {
  for (const GidEntry& e : read_gid_table()) {
    SCOPED_TRACE(e.ifname);
    EXPECT_GT(e.link_mtu, 0);
    if (e.ifname == "lo") {
      EXPECT_TRUE(e.loopback);
    }
  }
}

// The port's rate follows the link as rxe's and siw's do: the kernel's
// ib_get_eth_speed (Linux 6.1) maps the netdev's speed to an IB width and
// speed. (Codes as ibv_port_attr has them: width 1 = 1X, 2 = 4X; speed 1 =
// SDR, 2 = DDR, 8 = FDR10, 32 = EDR.)
TEST(PortRate, LinkSpeedMapsAsTheKernelDoes) {
  struct Case {
    int mbps;
    uint8_t width, speed;
  } cases[] = {
      {100, 1, 1},     {1000, 1, 1},   // up to 1 GbE: 1X SDR (2.5 Gb/s)
      {2500, 1, 8},    {10000, 1, 8},  // up to 10 GbE (a veth): 1X FDR10
      {20000, 2, 2},                   // 4X DDR
      {25000, 1, 32},                  // 1X EDR
      {40000, 2, 8},                   // 4X FDR10
      {50000, 2, 32},  {100000, 2, 32}, {400000, 2, 32},  // 4X EDR above
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.mbps);
    const PortRate r = port_rate_for_link(c.mbps);
    EXPECT_EQ(r.width, c.width);
    EXPECT_EQ(r.speed, c.speed);
  }
  EXPECT_EQ(port_rate_for_link(0).speed, 0);  // unknown
}

TEST(PortRate, TheLinkOfTheFirstNetworkInterfaceSetsIt) {
  GidEntry lo = entry(1, "lo", 65536, true), veth = entry(2, "veth0", 1500, false),
           fast = entry(3, "eth1", 1500, false);
  veth.link_speed_mbps = 10000;
  fast.link_speed_mbps = 100000;
  EXPECT_EQ(port_link_rate(std::vector<GidEntry>{lo, veth, fast}).speed, 8);  // (not the fastest)
  EXPECT_EQ(port_link_rate(std::vector<GidEntry>{lo, fast, veth}).speed, 32);
  // Only loopback, or a first link of unknown speed (virtio): unknown, the
  // profile's rate then.
  EXPECT_EQ(port_link_rate(std::vector<GidEntry>{lo}).speed, 0);
  GidEntry virtio = entry(2, "eth0", 1500, false);
  EXPECT_EQ(port_link_rate(std::vector<GidEntry>{lo, virtio, veth}).speed, 0);
}

TEST(PortRate, GidTableCarriesNoSpeedForLoopback) {
  for (const GidEntry& e : read_gid_table()) {
    if (e.loopback) {
      EXPECT_EQ(e.link_speed_mbps, 0) << e.ifname;
    }
  }
}

}  // namespace
}  // namespace sv
