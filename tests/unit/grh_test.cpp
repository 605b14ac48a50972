#include "core/grh.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>

#include "core/gid_table.h"

namespace sv {
namespace {

ibv_gid v4(const char* ip) {
  ibv_gid g{};
  g.raw[10] = g.raw[11] = 0xff;
  inet_pton(AF_INET, ip, g.raw + 12);
  return g;
}

ibv_gid v6(const char* ip) {
  ibv_gid g{};
  inet_pton(AF_INET6, ip, g.raw);
  return g;
}

// RFC 1071, written independently of grh.cpp: sums to 0xffff when valid.
uint16_t fold(const uint8_t* p, int n) {
  uint32_t sum = 0;
  for (int i = 0; i < n; i += 2) sum += (p[i] << 8) | p[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(sum);
}

TEST(Grh, Ipv4HeaderInTheLastTwentyBytes) {
  uint8_t grh[kGrhBytes];
  build_grh(grh, v4("10.1.2.3"), v4("127.0.0.1"), /*tc=*/0x20, /*hop=*/64, 0, /*payload=*/100);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(grh[i], 0) << i;
  const uint8_t* ip = grh + 20;
  EXPECT_EQ(ip[0], 0x45);
  EXPECT_EQ(ip[1], 0x20);
  EXPECT_EQ((ip[2] << 8) | ip[3], 20 + 8 + 12 + 8 + 100 + 4);  // IP+UDP+BTH+DETH+payload+ICRC
  EXPECT_EQ(ip[8], 64);
  EXPECT_EQ(ip[9], 17);  // UDP
  EXPECT_EQ(fold(ip, 20), 0xffff);
  EXPECT_EQ(std::memcmp(ip + 12, "\x0a\x01\x02\x03", 4), 0);
  ParsedGrh p;
  ASSERT_TRUE(parse_grh(grh, &p));
  EXPECT_TRUE(gid_equal(p.sgid, v4("10.1.2.3")));
  EXPECT_TRUE(gid_equal(p.dgid, v4("127.0.0.1")));
  EXPECT_EQ(p.traffic_class, 0x20);
  EXPECT_EQ(p.hop_limit, 64);
}

TEST(Grh, Ipv6Header) {
  uint8_t grh[kGrhBytes];
  build_grh(grh, v6("fd00::2"), v6("fd00::3"), 0x10, 7, 0x12345, 8);
  EXPECT_EQ(grh[0] >> 4, 6);
  EXPECT_EQ(grh[6], 17);  // next header: UDP (RoCEv2)
  EXPECT_EQ(grh[7], 7);
  ParsedGrh p;
  ASSERT_TRUE(parse_grh(grh, &p));
  EXPECT_TRUE(gid_equal(p.sgid, v6("fd00::2")));
  EXPECT_TRUE(gid_equal(p.dgid, v6("fd00::3")));
  EXPECT_EQ(p.flow_label, 0x12345u);
  EXPECT_EQ(p.traffic_class, 0x10);
}

// mlx5's convention for a RoCE completion's sl (the CQE's L3 header type),
// which UCX relies on: IPv4 when both GIDs are IPv4-mapped, else IPv6.
TEST(Grh, RoceL3HeaderTypeAsMlx5ReportsIt) {
  EXPECT_EQ(roce_l3_header_type(v4("10.1.2.3"), v4("10.1.2.4")), 2);
  EXPECT_EQ(roce_l3_header_type(v6("fd00::2"), v6("fd00::3")), 1);
  EXPECT_EQ(roce_l3_header_type(v6("::1"), v6("::1")), 1);
}

TEST(Grh, RejectsGarbage) {
  uint8_t grh[kGrhBytes] = {};
  ParsedGrh p;
  EXPECT_FALSE(parse_grh(grh, &p));
}

}  // namespace
}  // namespace sv
