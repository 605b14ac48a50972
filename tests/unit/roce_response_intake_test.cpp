// What the RoCEv2 requester takes from an answer (transport/roce_sender.cpp
// on_response): only its connected peer's answers count, and only answers
// about a message in flight move its state. A network can send anything.
#include <gtest/gtest.h>

#include "net/roce_frame.h"
#include "fake_roce_net.h"
#include "transport/roce_engine.h"
#include "util/clock.h"

namespace sv::roce {
namespace {

constexpr uint32_t kQpn = 0x10000, kPsn = 100;

in6_addr address(uint8_t last) { return net::v4_mapped(htonl(0x0a000000u | last)); }

// One SEND in flight (PSN kPsn) from QP kQpn to 10.0.0.2, being timed.
struct OneSendInFlight : ::testing::Test {
  fake::FakeNet net;
  Engine& e = net.add_node(1).engine;
  Sender& s = e.senders[kQpn];
  const in6_addr peer = address(2), stranger = address(3);

  void SetUp() override {
    Outbound o;
    o.req.opcode = IBV_WR_SEND;
    o.req.type = IBV_QPT_RC;
    o.req.src_qpn = kQpn;
    std::memcpy(o.dst.dgid.raw, &peer, 16);
    o.req.first_psn = kPsn;
    o.npsn = o.sent = o.high = 1;
    s.out.push_back(o);
    ++e.busy_senders;
    s.next_psn = kPsn + 1;
    s.rtt_psn = kPsn;
    s.rtt_sent_ns = net.now_ns() - 1'000'000;
  }
  void answer(uint8_t syndrome, uint32_t psn, const in6_addr& from) {
    net::RocePacket p;
    p.bth.opcode = net::kTransportRc | net::kAck;
    p.bth.dest_qp = kQpn;
    p.bth.psn = psn;
    p.aeth.syndrome = syndrome;
    e.on_response(p, PacketAddrs{from, address(1)});
  }
};

TEST_F(OneSendInFlight, ANakFromAnotherAddressIsDropped) {
  answer(net::aeth_nak(net::NakCode::kRemoteAccessError), kPsn, stranger);
  EXPECT_EQ(s.out.size(), 1u);
  EXPECT_TRUE(e.answers.empty());
  // The same NAK from the peer ends the work request.
  answer(net::aeth_nak(net::NakCode::kRemoteAccessError), kPsn, peer);
  ASSERT_EQ(e.answers.size(), 1u);
  EXPECT_EQ(e.answers[0].response.outcome, Outcome::kRemoteAccess);
}

TEST_F(OneSendInFlight, AnAckOutsideTheWindowTimesNothing) {
  answer(net::aeth_ack(), kPsn + 1000, peer);  // after the timed PSN, about no message
  EXPECT_EQ(s.srtt_ns, 0u);
  EXPECT_NE(s.rtt_sent_ns, 0u);
  EXPECT_EQ(s.out.size(), 1u);
  answer(net::aeth_ack(), kPsn, peer);
  EXPECT_GE(s.srtt_ns, 1'000'000u);  // the real answer, a millisecond after the send
  EXPECT_TRUE(s.out.empty());
}

// A second SEND is queued behind the first, its PSN given, not sent: an ACK
// of it (or of anything up to it) is no answer of the peer's.
TEST_F(OneSendInFlight, AnAckOfAPacketNotSentCompletesNothing) {
  Outbound queued = s.out.front();
  queued.req.first_psn = kPsn + 1;
  queued.sent = queued.high = 0;
  s.out.push_back(queued);
  s.next_psn = kPsn + 2;
  answer(net::aeth_ack(), kPsn + 1, peer);
  EXPECT_EQ(s.out.size(), 2u);
  EXPECT_TRUE(e.answers.empty());
  answer(net::aeth_ack(), kPsn, peer);  // the one sent
  EXPECT_EQ(s.out.size(), 1u);
  EXPECT_EQ(e.answers.size(), 1u);
}

}  // namespace
}  // namespace sv::roce
