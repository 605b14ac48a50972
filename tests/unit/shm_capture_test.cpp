// SOFTVERBS_PCAP on the intra-host path (transport/shm_capture.h): the
// packets a message carried by shared memory is written as. Each packet is
// built into a frame and parsed back (ICRC checked by the codec), then its
// headers are compared with what a NIC would have sent.
#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "core/message.h"
#include "core/pd.h"
#include "net/roce_frame.h"
#include "net/roce_opcode.h"
#include "net/udp_sport.h"
#include "transport/shm_capture.h"

namespace sv::roce {
namespace {

using namespace net;

struct Seen {
  bool response;
  ParsedFrame frame;
  std::vector<uint8_t> payload;
};

ibv_gid gid_v4(uint8_t last) {
  ibv_gid g{};
  g.raw[10] = g.raw[11] = 0xFF;
  g.raw[12] = 10;
  g.raw[15] = last;
  return g;
}

class ShmCapture : public ::testing::Test {
 protected:
  ShmCapture() {
    dst.sgid = gid_v4(1);
    dst.dgid = gid_v4(2);
    dst.traffic_class = 0x20;
    std::memset(&m, 0, sizeof m);
    m.qp_type = IBV_QPT_RC;
    m.opcode = IBV_WR_SEND;
    m.src_qpn = 0x30001;
    m.dst_qpn = 0x40002;
    m.dst = &dst;
  }

  // The packets, each through build_frame and parse_frame.
  std::vector<Seen> run(Response r, uint32_t psn, uint32_t msn, uint32_t mtu) {
    std::vector<Seen> seen;
    exchange_packets(m, r, psn, msn, mtu, [&](const ExchangePacket& e) {
      FrameAddrs a;
      a.src_ip = e.src;
      a.dst_ip = e.dst;
      a.udp_sport = e.src_port;
      a.traffic_class = e.traffic_class;
      std::vector<uint8_t> f = build_frame(a, e.pkt, e.payload, e.len);
      ASSERT_FALSE(f.empty());
      Seen s{e.response, {}, {}};
      ASSERT_TRUE(parse_frame(f.data(), f.size(), &s.frame)) << to_string(s.frame.error);
      s.payload.assign(s.frame.packet.payload, s.frame.packet.payload + s.frame.packet.payload_len);
      s.frame.packet.payload = nullptr;  // points into f
      seen.push_back(std::move(s));
    });
    return seen;
  }

  void set_payload(size_t n) {
    bytes.resize(n);
    std::iota(bytes.begin(), bytes.end(), uint8_t{1});
    // two pieces, to see them joined
    pieces[0] = Piece{bytes.data(), static_cast<uint32_t>(n / 3)};
    pieces[1] = Piece{bytes.data() + n / 3, static_cast<uint32_t>(n - n / 3)};
    m.pieces = pieces;
    m.num_pieces = 2;
    m.length = n;
  }

  Destination dst;
  Message m;
  std::vector<uint8_t> bytes;
  Piece pieces[2];
};

TEST_F(ShmCapture, RcSendWithImmIsSegmentedAndAcknowledged) {
  set_payload(2500);
  m.opcode = IBV_WR_SEND_WITH_IMM;
  m.imm = htonl(0x11223344);
  m.solicited = true;
  auto seen = run(Response{Outcome::kAck, 0}, 0xFFFFFE, 7, 1024);
  ASSERT_EQ(seen.size(), 4u);
  const uint8_t ops[] = {0x00, 0x01, 0x03};
  std::vector<uint8_t> joined;
  for (int i = 0; i < 3; ++i) {
    const RocePacket& p = seen[i].frame.packet;
    EXPECT_FALSE(seen[i].response);
    EXPECT_EQ(p.bth.opcode, ops[i]);
    EXPECT_EQ(p.bth.dest_qp, 0x40002u);
    EXPECT_EQ(p.bth.psn, psn_add(0xFFFFFE, i));  // wraps
    EXPECT_EQ(p.bth.ack_req, i == 2);
    EXPECT_EQ(p.bth.se, i == 2);
    EXPECT_TRUE(seen[i].frame.addrs.ipv4());
    EXPECT_EQ(seen[i].frame.addrs.udp_dport, kRoceUdpPort);
    EXPECT_EQ(seen[i].frame.addrs.udp_sport, rc_udp_sport(0, 0x30001, 0x40002));
    EXPECT_EQ(seen[i].frame.addrs.traffic_class, 0x20);
    EXPECT_EQ(std::memcmp(&seen[i].frame.addrs.src_ip, dst.sgid.raw, 16), 0);
    joined.insert(joined.end(), seen[i].payload.begin(), seen[i].payload.end());
  }
  EXPECT_EQ(seen[2].frame.packet.imm, 0x11223344u);
  EXPECT_EQ(joined, bytes);
  const Seen& ack = seen[3];
  EXPECT_TRUE(ack.response);
  EXPECT_EQ(ack.frame.packet.bth.opcode, kAck);
  EXPECT_EQ(ack.frame.packet.bth.dest_qp, 0x30001u);
  EXPECT_EQ(ack.frame.packet.bth.psn, 0x000000u);  // the last request PSN
  EXPECT_EQ(aeth_type(ack.frame.packet.aeth.syndrome), AethType::kAck);
  EXPECT_EQ(ack.frame.packet.aeth.msn, 7u);
  EXPECT_EQ(std::memcmp(&ack.frame.addrs.src_ip, dst.dgid.raw, 16), 0);
  EXPECT_EQ(ack.frame.addrs.udp_sport, rc_udp_sport(0, 0x40002, 0x30001));
}

TEST_F(ShmCapture, SendWithInvalidateCarriesIeth) {
  set_payload(10);
  m.opcode = IBV_WR_SEND_WITH_INV;
  m.imm = 0xABCD01;  // the rkey, as the work request gave it
  auto seen = run(Response{Outcome::kAck, 0}, 5, 1, 4096);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].frame.packet.bth.opcode, kSendOnlyInv);
  EXPECT_EQ(seen[0].frame.packet.ieth, 0xABCD01u);
  EXPECT_EQ(seen[0].payload, bytes);
}

TEST_F(ShmCapture, WriteWithImmHasRethFirstAndImmLast) {
  set_payload(3000);
  m.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
  m.imm = htonl(42);
  m.remote_addr = 0x7F0000001000;
  m.rkey = 0x1234;
  auto seen = run(Response{Outcome::kAck, 0}, 100, 3, 2048);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0].frame.packet.bth.opcode, kWriteFirst);
  EXPECT_EQ(seen[0].frame.packet.reth, (Reth{0x7F0000001000, 0x1234, 3000}));
  EXPECT_EQ(seen[0].payload.size(), 2048u);
  EXPECT_EQ(seen[1].frame.packet.bth.opcode, kWriteLastImm);
  EXPECT_EQ(seen[1].frame.packet.imm, 42u);
  EXPECT_EQ(seen[1].payload.size(), 952u);
  EXPECT_EQ(seen[2].frame.packet.bth.opcode, kAck);
  EXPECT_EQ(seen[2].frame.packet.bth.psn, 101u);
}

TEST_F(ShmCapture, UdHasDethAndNoAnswer) {
  set_payload(100);
  m.qp_type = IBV_QPT_UD;
  m.opcode = IBV_WR_SEND_WITH_IMM;
  m.qkey = 0x11111111;
  m.imm = htonl(9);
  auto seen = run(Response{Outcome::kAck, 0}, 77, 0, 4096);
  ASSERT_EQ(seen.size(), 1u);
  const RocePacket& p = seen[0].frame.packet;
  EXPECT_EQ(p.bth.opcode, kTransportUd | kSendOnlyImm);
  EXPECT_EQ(p.deth, (Deth{0x11111111, 0x30001}));
  EXPECT_EQ(p.imm, 9u);
  EXPECT_FALSE(p.bth.ack_req);
  EXPECT_EQ(seen[0].frame.addrs.udp_sport, ud_udp_sport(0x30001));
}

TEST_F(ShmCapture, UcHasNoAnswer) {
  set_payload(1500);
  m.qp_type = IBV_QPT_UC;
  auto seen = run(Response{Outcome::kAck, 0}, 0, 0, 1024);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].frame.packet.bth.opcode, kTransportUc | kSendFirst);
  EXPECT_EQ(seen[1].frame.packet.bth.opcode, kTransportUc | kSendLast);
  EXPECT_FALSE(seen[1].frame.packet.bth.ack_req);
}

TEST_F(ShmCapture, RnrNakNamesTheFirstPsn) {
  set_payload(2048);
  auto seen = run(Response{Outcome::kRnr, 14}, 50, 4, 1024);
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[2].frame.packet.bth.psn, 50u);
  EXPECT_EQ(seen[2].frame.packet.aeth.syndrome, aeth_rnr_nak(14));
  EXPECT_EQ(seen[2].frame.packet.aeth.msn, 4u);
}

TEST_F(ShmCapture, ErrorsAreNaksAndSilenceIsNothing) {
  set_payload(16);
  m.opcode = IBV_WR_RDMA_WRITE;
  auto seen = run(Response{Outcome::kRemoteAccess, 0}, 9, 0, 1024);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[1].frame.packet.aeth.syndrome, aeth_nak(NakCode::kRemoteAccessError));
  EXPECT_EQ(seen[1].frame.packet.bth.psn, 9u);
  seen = run(Response{Outcome::kRemoteOperational, 0}, 9, 0, 1024);
  EXPECT_EQ(seen.back().frame.packet.aeth.syndrome, aeth_nak(NakCode::kRemoteOperationalError));
  seen = run(Response{Outcome::kRemoteInvalid, 0}, 9, 0, 1024);
  EXPECT_EQ(seen.back().frame.packet.aeth.syndrome, aeth_nak(NakCode::kInvalidRequest));
  seen = run(Response{Outcome::kNoResponse, 0}, 9, 0, 1024);
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_FALSE(seen[0].response);
}

TEST_F(ShmCapture, ReadRequestAndResponses) {
  std::vector<uint8_t> sink(2500);
  std::iota(sink.begin(), sink.end(), uint8_t{7});
  Piece piece{sink.data(), 2500};
  m.opcode = IBV_WR_RDMA_READ;
  m.sink = &piece;
  m.num_sink = 1;
  m.length = 2500;
  m.remote_addr = 0x1000;
  m.rkey = 0x77;
  auto seen = run(Response{Outcome::kAck, 0}, 10, 2, 1024);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0].frame.packet.bth.opcode, kReadRequest);
  EXPECT_EQ(seen[0].frame.packet.reth, (Reth{0x1000, 0x77, 2500}));
  EXPECT_TRUE(seen[0].frame.packet.bth.ack_req);
  const uint8_t ops[] = {kReadResponseFirst, kReadResponseMiddle, kReadResponseLast};
  std::vector<uint8_t> joined;
  for (int i = 0; i < 3; ++i) {
    const Seen& s = seen[1 + i];
    EXPECT_TRUE(s.response);
    EXPECT_EQ(s.frame.packet.bth.opcode, ops[i]);
    EXPECT_EQ(s.frame.packet.bth.psn, 10u + i);
    EXPECT_EQ(s.frame.packet.bth.dest_qp, 0x30001u);
    if (i != 1) {
      EXPECT_EQ(s.frame.packet.aeth.msn, 2u);
    }
    joined.insert(joined.end(), s.payload.begin(), s.payload.end());
  }
  EXPECT_EQ(joined, sink);
}

TEST_F(ShmCapture, AtomicAndItsAcknowledge) {
  uint64_t original = 0x0102030405060708;
  Piece piece{reinterpret_cast<uint8_t*>(&original), 8};
  m.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
  m.sink = &piece;
  m.num_sink = 1;
  m.length = 8;
  m.remote_addr = 0x2000;
  m.rkey = 5;
  m.compare_add = 1;
  m.swap = 2;
  auto seen = run(Response{Outcome::kAck, 0}, 3, 1, 1024);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].frame.packet.bth.opcode, kCompareSwap);
  EXPECT_EQ(seen[0].frame.packet.atomic_eth, (AtomicEth{0x2000, 5, 2, 1}));
  EXPECT_EQ(seen[1].frame.packet.bth.opcode, kAtomicAck);
  EXPECT_EQ(seen[1].frame.packet.atomic_ack, original);
}

TEST_F(ShmCapture, XrcRequestsCarryTheSrqAndResponsesAreRc) {
  set_payload(8);
  m.qp_type = IBV_QPT_XRC_SEND;
  m.xrc_srqn = 0x50003;
  auto seen = run(Response{Outcome::kAck, 0}, 0, 1, 1024);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].frame.packet.bth.opcode, kTransportXrc | kSendOnly);
  EXPECT_EQ(seen[0].frame.packet.xrceth.srqn, 0x50003u);
  EXPECT_EQ(seen[1].frame.packet.bth.opcode, kAck);
}

TEST_F(ShmCapture, Ipv6Gids) {
  inet_pton(AF_INET6, "fd93::1", dst.sgid.raw);
  inet_pton(AF_INET6, "fd93::2", dst.dgid.raw);
  set_payload(0);
  auto seen = run(Response{Outcome::kAck, 0}, 0, 1, 1024);
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_FALSE(seen[0].frame.addrs.ipv4());
  EXPECT_EQ(seen[0].frame.packet.bth.opcode, kSendOnly);
  EXPECT_TRUE(seen[0].payload.empty());
}

}  // namespace
}  // namespace sv::roce
