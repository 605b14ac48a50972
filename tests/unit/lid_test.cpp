// LIDs of the InfiniBand link-layer mode name hosts by their address
// (core/lid.h): what one host computes for itself, another reads back.
#include "core/lid.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <vector>

namespace sv {
namespace {

GidEntry v4(const char* ip, const char* ifname, bool loopback = false) {
  GidEntry e{};
  e.gid.raw[10] = e.gid.raw[11] = 0xff;
  inet_pton(AF_INET, ip, e.gid.raw + 12);
  e.ifname = ifname;
  e.loopback = loopback;
  return e;
}

GidEntry v6(const char* ip, const char* ifname, bool loopback = false) {
  GidEntry e{};
  inet_pton(AF_INET6, ip, e.gid.raw);
  e.ifname = ifname;
  e.loopback = loopback;
  return e;
}

TEST(Lid, TwoHostsNameEachOtherByTheirAddresses) {
  const std::vector<GidEntry> a = {v4("10.96.0.1", "veth"), v6("fd00::1", "veth"), v4("127.0.0.1", "lo", true)};
  const std::vector<GidEntry> b = {v4("10.96.0.2", "veth"), v4("127.0.0.1", "lo", true)};
  const uint16_t lid_a = host_lid(a), lid_b = host_lid(b);
  EXPECT_EQ(lid_a, 0x0001);
  EXPECT_EQ(lid_b, 0x0002);
  ibv_gid g{};
  ASSERT_TRUE(gid_of_lid(lid_b, a, &g)) << "A reaches B's LID";
  EXPECT_TRUE(gid_equal(g, b[0].gid));
  ASSERT_TRUE(gid_of_lid(lid_a, b, &g));
  EXPECT_TRUE(gid_equal(g, a[0].gid));
  ASSERT_TRUE(gid_of_lid(lid_a, a, &g)) << "its own LID is this host";
  EXPECT_TRUE(gid_equal(g, a[0].gid));
  // What a receive completion reports: the sender's LID.
  EXPECT_EQ(lid_of_gid(b[0].gid, a, lid_a), lid_b);
  EXPECT_EQ(lid_of_gid(a[2].gid, a, lid_a), lid_a) << "any GID of this host is its LID";
  EXPECT_EQ(lid_of_gid(b[0].gid, {}, 0), lid_b) << "another host's, from its address alone";
}

TEST(Lid, NoUnicastLidFallsBackToOne) {
  EXPECT_EQ(host_lid(std::vector<GidEntry>{v4("127.0.0.1", "lo", true)}), 1) << "loopback only";
  EXPECT_EQ(host_lid(std::vector<GidEntry>{v4("10.1.0.0", "eth0")}), 1) << "x.y.0.0 ends in LID 0";
  EXPECT_EQ(host_lid(std::vector<GidEntry>{v4("10.1.200.7", "eth0")}), 1) << "0xC807 is a multicast LID";
  EXPECT_EQ(host_lid(std::vector<GidEntry>{v4("192.0.2.2", "eth0")}), 0x0202);
  ibv_gid g{};
  const std::vector<GidEntry> a = {v4("10.96.0.1", "veth")};
  EXPECT_FALSE(gid_of_lid(0, a, &g));
  EXPECT_FALSE(gid_of_lid(0xC001, a, &g)) << "multicast LIDs need a GRH";
  EXPECT_FALSE(gid_of_lid(7, std::vector<GidEntry>{v4("127.0.0.1", "lo", true)}, &g)) << "no address to complete it";
  EXPECT_EQ(lid_of_gid(v6("fd00::9", "x").gid, a, 1), 0) << "an IPv6 host has no LID here";
}

}  // namespace
}  // namespace sv
