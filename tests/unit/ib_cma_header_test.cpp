// rdma_cm's private-data header and IP service IDs (src/ibcm/cma_header),
// against the byte layout of Linux cma.c struct cma_hdr.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>

#include "ibcm/cm_messages.h"
#include "ibcm/cma_header.h"

namespace sv::ibcm {
namespace {

sockaddr_in v4(const char* ip, uint16_t port) {
  sockaddr_in s{};
  s.sin_family = AF_INET;
  s.sin_port = htons(port);
  inet_pton(AF_INET, ip, &s.sin_addr);
  return s;
}

sockaddr_in6 v6(const char* ip, uint16_t port) {
  sockaddr_in6 s{};
  s.sin6_family = AF_INET6;
  s.sin6_port = htons(port);
  inet_pton(AF_INET6, ip, &s.sin6_addr);
  return s;
}

TEST(IbCma, ServiceIds) {
  // RDMA_IB_IP_PS_TCP / _UDP / _IB | port.
  EXPECT_EQ(ip_service_id(PortSpace::kTcp, 7471), 0x0000000001061D2Fu);
  EXPECT_EQ(ip_service_id(PortSpace::kUdp, 7471), 0x0000000001111D2Fu);
  EXPECT_EQ(ip_service_id(PortSpace::kIb, 1), 0x00000000013F0001u);
  EXPECT_EQ(parse_ip_service_id(0x0000000001061D2F), (IpService{PortSpace::kTcp, 7471}));
  EXPECT_EQ(parse_ip_service_id(0x0000000001110000), (IpService{PortSpace::kUdp, 0}));
  EXPECT_EQ(parse_ip_service_id(0x00000000013FFFFF), (IpService{PortSpace::kIb, 0xFFFF}));
  EXPECT_FALSE(parse_ip_service_id(0x0000000000021D2F));  // IPoIB: not in the IP CM range
  EXPECT_FALSE(parse_ip_service_id(0x0000000001071D2F));  // unknown port space
  EXPECT_FALSE(parse_ip_service_id(0x0200000001061D2F));  // CM-assigned range
  EXPECT_FALSE(parse_ip_service_id(0x0000000101061D2F));
}

TEST(IbCma, Ipv4Bytes) {
  sockaddr_in src = v4("192.168.1.2", 5555), dst = v4("10.0.0.1", 7471);
  auto h = cma_header_from(reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst));
  ASSERT_TRUE(h);
  std::array<uint8_t, kCmaHeaderSize> b;
  b.fill(0xEE);
  encode_cma_header(*h, b);
  const std::array<uint8_t, kCmaHeaderSize> want = {
      0x00, 0x40, 0x15, 0xB3,                                // version, IPv4, port 5555
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 192, 168, 1, 2,    // source
      0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 1};      // destination
  EXPECT_EQ(b, want);

  auto back = decode_cma_header(b);
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, *h);
  sockaddr_storage s, d;
  to_sockaddrs(*back, 7471, s, d);
  EXPECT_EQ(std::memcmp(&s, &src, sizeof src), 0);
  EXPECT_EQ(std::memcmp(&d, &dst, sizeof dst), 0);
}

TEST(IbCma, Ipv6Bytes) {
  sockaddr_in6 src = v6("fe80::1", 1), dst = v6("2001:db8::42", 2);
  auto h = cma_header_from(reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst));
  ASSERT_TRUE(h);
  std::array<uint8_t, kCmaHeaderSize> b;
  encode_cma_header(*h, b);
  EXPECT_EQ(b[0], 0x00);
  EXPECT_EQ(b[1], 0x60);
  EXPECT_EQ(b[2], 0x00);
  EXPECT_EQ(b[3], 0x01);
  EXPECT_EQ(std::memcmp(b.data() + 4, &src.sin6_addr, 16), 0);
  EXPECT_EQ(std::memcmp(b.data() + 20, &dst.sin6_addr, 16), 0);
  auto back = decode_cma_header(b);
  ASSERT_TRUE(back);
  sockaddr_storage s, d;
  to_sockaddrs(*back, 2, s, d);
  EXPECT_EQ(std::memcmp(&s, &src, sizeof src), 0);
  EXPECT_EQ(std::memcmp(&d, &dst, sizeof dst), 0);
}

TEST(IbCma, RejectsMalformedHeaders) {
  sockaddr_in a = v4("1.2.3.4", 1);
  sockaddr_in6 b6 = v6("::1", 1);
  EXPECT_FALSE(cma_header_from(reinterpret_cast<sockaddr*>(&a), reinterpret_cast<sockaddr*>(&b6)));
  EXPECT_FALSE(cma_header_from(nullptr, reinterpret_cast<sockaddr*>(&a)));
  sockaddr un{};
  un.sa_family = AF_UNIX;
  EXPECT_FALSE(cma_header_from(&un, &un));

  std::array<uint8_t, kCmaHeaderSize> b;
  encode_cma_header(*cma_header_from(reinterpret_cast<sockaddr*>(&a), reinterpret_cast<sockaddr*>(&a)), b);
  EXPECT_FALSE(decode_cma_header(std::span<const uint8_t>(b.data(), kCmaHeaderSize - 1)));
  auto bad = b;
  bad[0] = 0x10;  // cma_version
  EXPECT_FALSE(decode_cma_header(bad));
  bad = b;
  bad[1] = 0x50;  // IP version 5
  EXPECT_FALSE(decode_cma_header(bad));
  bad = b;
  bad[1] = 0x4F;  // low nibble reserved: ignored
  EXPECT_TRUE(decode_cma_header(bad));
  bad = b;
  bad[4] = 0xFF;  // IPv4 padding: ignored, as cma.c does
  auto h = decode_cma_header(bad);
  ASSERT_TRUE(h);
  EXPECT_EQ(h->src_addr[0], 0);
}

TEST(IbCma, SitsAtTheStartOfReqPrivateData) {
  // As the network CM will send it: REQ private data = cma_hdr + user data.
  sockaddr_in src = v4("10.1.1.1", 40000), dst = v4("10.1.1.2", 7471);
  Req req;
  req.service_id = ip_service_id(PortSpace::kTcp, 7471);
  encode_cma_header(*cma_header_from(reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst)),
                    std::span(req.private_data).first<kCmaHeaderSize>());
  std::memcpy(req.private_data.data() + kCmaHeaderSize, "hello", 5);
  auto mad = encode(CmMessage{1, req});
  EXPECT_EQ(mad[164], 0x00);          // REQ private data starts at MAD byte 24 + 140
  EXPECT_EQ(mad[165], 0x40);
  EXPECT_EQ(mad[166], 40000 >> 8);
  EXPECT_EQ(mad[183], 1);             // last byte of the source IPv4 address
  EXPECT_EQ(mad[199], 2);             // last byte of the destination IPv4 address
  EXPECT_EQ(std::memcmp(mad.data() + 164 + 36, "hello", 5), 0);

  CmMessage out;
  ASSERT_EQ(decode(mad, out), DecodeError::kNone);
  const Req& r = std::get<Req>(out.body);
  auto svc = parse_ip_service_id(r.service_id);
  ASSERT_TRUE(svc);
  auto h = decode_cma_header(r.private_data);
  ASSERT_TRUE(h);
  sockaddr_storage s, d;
  to_sockaddrs(*h, svc->port, s, d);
  EXPECT_EQ(std::memcmp(&s, &src, sizeof src), 0);
  EXPECT_EQ(std::memcmp(&d, &dst, sizeof dst), 0);
}

}  // namespace
}  // namespace sv::ibcm
