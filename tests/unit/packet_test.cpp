// The raw-packet engine's frame arithmetic against known answers: the
// Toeplitz hash against the verification suite of Microsoft's RSS
// specification, checksums against RFC 1071 examples and round trips, TSO
// segments, the Ethernet FCS, and parsing.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/packet.h"

using namespace sv::packet;

namespace {

const uint8_t kRssKey[40] = {0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
                             0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
                             0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa};

std::vector<uint8_t> v4_input(const char* src, const char* dst, int sport, int dport) {
  std::vector<uint8_t> in(12);
  inet_pton(AF_INET, src, in.data());
  inet_pton(AF_INET, dst, in.data() + 4);
  uint16_t s = htons(static_cast<uint16_t>(sport)), d = htons(static_cast<uint16_t>(dport));
  std::memcpy(in.data() + 8, &s, 2);
  std::memcpy(in.data() + 10, &d, 2);
  return in;
}

// An Ethernet + IPv4 + UDP frame with zero checksums.
std::vector<uint8_t> udp_frame(size_t payload, bool vlan = false) {
  std::vector<uint8_t> f = {0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2};
  if (vlan) f.insert(f.end(), {0x81, 0x00, 0x20, 0x07});  // PCP 1, VID 7
  f.insert(f.end(), {0x08, 0x00});
  const uint16_t ip_len = static_cast<uint16_t>(20 + 8 + payload);
  f.insert(f.end(), {0x45, 0, static_cast<uint8_t>(ip_len >> 8), static_cast<uint8_t>(ip_len), 0, 1, 0x40, 0, 64,
                     17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2});
  const uint16_t udp_len = static_cast<uint16_t>(8 + payload);
  f.insert(f.end(), {0x30, 0x39, 0x01, 0xbb, static_cast<uint8_t>(udp_len >> 8), static_cast<uint8_t>(udp_len), 0, 0});
  for (size_t i = 0; i < payload; ++i) f.push_back(static_cast<uint8_t>(i * 7));
  return f;
}

// Ethernet + IPv4 + TCP header (20-byte TCP header), flags PSH|ACK|FIN.
std::vector<uint8_t> tcp_header() {
  std::vector<uint8_t> f = {0x02, 0, 0, 0, 0, 1, 0x02, 0, 0, 0, 0, 2, 0x08, 0x00};
  f.insert(f.end(), {0x45, 0, 0, 40, 0x12, 0x34, 0x40, 0, 64, 6, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2});
  f.insert(f.end(), {0x04, 0x00, 0x00, 0x50, 0, 0, 0x10, 0, 0, 0, 0, 0, 0x50, 0x19, 0xff, 0xff, 0, 0, 0, 0});
  return f;
}

}  // namespace

TEST(Toeplitz, MatchesTheRssSpecificationVectors) {
  struct V {
    const char *src, *dst;
    int sport, dport;
    uint32_t with_ports, without_ports;
  };
  // Microsoft, "Verifying the RSS Hash Calculation" (IPv4).
  const V vectors[] = {
      {"66.9.149.187", "161.142.100.80", 2794, 1766, 0x51ccc178, 0x323e8fc2},
      {"199.92.111.2", "65.69.140.83", 14230, 4739, 0xc626b0ea, 0xd718262a},
      {"24.19.198.95", "12.22.207.184", 12898, 38024, 0x5c2b394a, 0xd2d0a5de},
      {"38.27.205.30", "209.142.163.6", 48228, 2217, 0xafc7327f, 0x82989176},
      {"153.39.163.191", "202.188.127.2", 44251, 1303, 0x10e828a2, 0x5d1809c5},
  };
  for (const V& v : vectors) {
    auto in = v4_input(v.src, v.dst, v.sport, v.dport);
    EXPECT_EQ(toeplitz(kRssKey, 40, in.data(), 12), v.with_ports) << v.src;
    EXPECT_EQ(toeplitz(kRssKey, 40, in.data(), 8), v.without_ports) << v.src;
  }
}

TEST(Checksum, Rfc1071ExampleAndRoundTrips) {
  // RFC 1071 section 3: 0001 f203 f4f5 f6f7 sums to 0xddf2 (checksum 0x220d).
  const uint8_t words[] = {0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7};
  EXPECT_EQ(csum_fold(csum_add(0, words, sizeof words)), 0x220d);
  for (bool vlan : {false, true}) {
    auto f = udp_frame(33, vlan);
    EXPECT_FALSE(checksums_ok(f.data(), f.size()));
    fill_checksums(f.data(), f.size());
    EXPECT_TRUE(checksums_ok(f.data(), f.size()));
    f[f.size() - 1] ^= 1;  // a flipped payload bit
    EXPECT_FALSE(checksums_ok(f.data(), f.size()));
  }
}

TEST(Parse, LayersWithAndWithoutVlan) {
  auto f = udp_frame(10, true);
  Parsed p = parse(f.data(), f.size());
  EXPECT_TRUE(p.vlan);
  EXPECT_EQ(p.vlan_tci, 0x2007);
  EXPECT_EQ(p.ether_type, 0x0800);
  EXPECT_EQ(p.ip_version, 4);
  EXPECT_EQ(p.ip_proto, 17);
  EXPECT_EQ(p.src_port, 12345);
  EXPECT_EQ(p.dst_port, 443);
  EXPECT_EQ(p.l4, 14u + 4 + 20);
  auto short_frame = std::vector<uint8_t>(f.begin(), f.begin() + 20);
  Parsed q = parse(short_frame.data(), short_frame.size());
  EXPECT_EQ(q.ip_version, 0);  // the IP header is cut short
  EXPECT_EQ(q.l4, 0u);
}

TEST(Tso, SegmentsCarryTheRightLengthsSequencesAndFlags) {
  auto hdr = tcp_header();
  std::vector<uint8_t> payload(1000);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i);
  auto frames = segment_tcp(hdr.data(), hdr.size(), payload.data(), payload.size(), 300);
  ASSERT_EQ(frames.size(), 4u);
  size_t offset = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    const auto& f = frames[i];
    const size_t chunk = i < 3 ? 300 : 100;
    ASSERT_EQ(f.size(), hdr.size() + chunk);
    Parsed p = parse(f.data(), f.size());
    EXPECT_EQ((f[16] << 8 | f[17]), static_cast<int>(20 + 20 + chunk)) << "IP total length";
    EXPECT_EQ((f[18] << 8 | f[19]), 0x1234 + static_cast<int>(i)) << "IP id";
    uint32_t seq = uint32_t{f[p.l4 + 4]} << 24 | uint32_t{f[p.l4 + 5]} << 16 | f[p.l4 + 6] << 8 | f[p.l4 + 7];
    EXPECT_EQ(seq, 0x1000u + offset);
    const bool last = i == 3;
    EXPECT_EQ(f[p.l4 + 13] & 0x09, last ? 0x09 : 0) << "FIN and PSH only on the last segment";
    EXPECT_TRUE(f[p.l4 + 13] & 0x10) << "ACK on every segment";
    EXPECT_TRUE(checksums_ok(f.data(), f.size()));
    EXPECT_EQ(std::memcmp(f.data() + hdr.size(), payload.data() + offset, chunk), 0);
    offset += chunk;
  }
  EXPECT_TRUE(segment_tcp(hdr.data(), hdr.size() - 1, payload.data(), 10, 100).empty()) << "not a whole header";
}

TEST(Fcs, IsTheCrc32OfTheFrame) {
  // The CRC-32 check value of "123456789" is 0xcbf43926.
  const char* s = "123456789";
  EXPECT_EQ(fcs(reinterpret_cast<const uint8_t*>(s), 9), 0xcbf43926u);
}
