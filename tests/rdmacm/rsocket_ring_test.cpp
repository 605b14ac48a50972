// The bookkeeping of an rsockets stream connection (src/rdmacm/
// rsocket_ring.h, rsocket_wire.h) on its own: staging buffer pieces,
// the sender's view of the peer's ring, our receive ring, message credits
// and the grants a receiver owes.
#include "../../src/rdmacm/rsocket_ring.h"

#include <gtest/gtest.h>

#include <deque>
#include <random>

#include "../../src/rdmacm/rsocket_wire.h"

namespace rs = sv::rdmacm::rs;

namespace {

TEST(RsocketWire, ImmediateCarriesOperationAndArgument) {
  const uint32_t imm = rs::imm_pack(rs::Op::kIomap, 77);
  EXPECT_EQ(rs::imm_op(imm), rs::Op::kIomap);
  EXPECT_EQ(rs::imm_arg(imm), 77u);
  EXPECT_EQ(rs::imm_op(rs::imm_pack(rs::Op::kData, rs::kArgMask)), rs::Op::kData);
  EXPECT_EQ(rs::imm_arg(rs::imm_pack(rs::Op::kData, rs::kArgMask)), rs::kArgMask);
}

TEST(RsocketWire, CreditGrantRoundTrips) {
  rs::CreditGrant g{rs::CreditGrant::kMaxMessages, rs::CreditGrant::kMaxBytes};
  EXPECT_LE(g.pack(), rs::kArgMask);
  rs::CreditGrant back = rs::CreditGrant::unpack(g.pack());
  EXPECT_EQ(back.messages, g.messages);
  EXPECT_EQ(back.bytes, g.bytes);
  back = rs::CreditGrant::unpack(rs::CreditGrant{3, 65536}.pack());
  EXPECT_EQ(back.messages, 3u);
  EXPECT_EQ(back.bytes, 65536u);
}

TEST(RsocketStaging, PiecesNeverWrapAndComeBackInOrder) {
  rs::StagingRing ring(100);
  auto a = ring.take(60);
  EXPECT_EQ(a.offset, 0u);
  EXPECT_EQ(a.length, 60u);
  auto b = ring.take(60);  // only 40 left before the end, none at the start
  EXPECT_EQ(b.offset, 60u);
  EXPECT_EQ(b.length, 40u);
  EXPECT_EQ(ring.free(), 0u);
  EXPECT_EQ(ring.take(1).length, 0u);
  ring.release(a.accounted);
  auto c = ring.take(50);
  EXPECT_EQ(c.offset, 0u);
  EXPECT_EQ(c.length, 50u);
  ring.release(b.accounted);
  ring.release(c.accounted);
  EXPECT_EQ(ring.used(), 0u);
  EXPECT_EQ(ring.take(100).length, 100u);  // empty: starts over at 0
}

TEST(RsocketStaging, SkipsATinyEndForRoomAtTheStart) {
  rs::StagingRing ring(100);
  auto a = ring.take(90);
  auto b = ring.take(5);  // tail now at 95
  ring.release(a.accounted);
  auto c = ring.take(50);  // 5 bytes left at the end, 90 at the start
  EXPECT_EQ(c.offset, 0u);
  EXPECT_EQ(c.length, 50u);
  EXPECT_EQ(c.accounted, 55u);  // the skipped end comes back with this piece
  ring.release(b.accounted);
  ring.release(c.accounted);
  EXPECT_EQ(ring.used(), 0u);
}

TEST(RsocketStaging, RandomPiecesStayInsideAndBalance) {
  std::mt19937 rng(7);
  rs::StagingRing ring(4096);
  std::deque<rs::StagingRing::Span> inflight;
  uint64_t bytes = 0;
  for (int i = 0; i < 20000; ++i) {
    if (!inflight.empty() && (rng() % 3 == 0 || ring.free() == 0)) {
      ring.release(inflight.front().accounted);
      inflight.pop_front();
      continue;
    }
    auto s = ring.take(1 + rng() % 1500);
    if (!s.length) continue;
    ASSERT_LE(s.offset + s.length, ring.size());
    // No overlap with a piece in flight.
    for (const auto& f : inflight)
      ASSERT_TRUE(s.offset + s.length <= f.offset || f.offset + f.length <= s.offset);
    inflight.push_back(s);
    bytes += s.length;
  }
  while (!inflight.empty()) {
    ring.release(inflight.front().accounted);
    inflight.pop_front();
  }
  EXPECT_EQ(ring.used(), 0u);
  EXPECT_GT(bytes, 1000000u);
}

TEST(RsocketRemoteRing, SplitsAtTheEndAndFollowsGrants) {
  rs::RemoteRing remote(1000, 1000);
  EXPECT_EQ(remote.writable(), 1000u);
  remote.advance(700);
  EXPECT_EQ(remote.writable(), 300u);
  remote.advance(300);
  EXPECT_EQ(remote.offset(), 0u);
  EXPECT_EQ(remote.writable(), 0u);  // no credit left
  remote.grant(400);
  EXPECT_EQ(remote.writable(), 400u);
  remote.grant(10000);  // never more than the ring
  EXPECT_EQ(remote.credit(), 1000u);
}

TEST(RsocketReceiveRing, MirrorsTheSenderAcrossTheEnd) {
  rs::RemoteRing sender(1000, 1000);
  rs::ReceiveRing receiver(1000);
  std::mt19937 rng(3);
  uint64_t sent = 0, read = 0;
  for (int i = 0; i < 10000; ++i) {
    if (uint32_t n = std::min<uint32_t>(sender.writable(), 1 + rng() % 300)) {
      ASSERT_LE(sender.offset() + n, 1000u);
      ASSERT_TRUE(receiver.arrived(n));
      sender.advance(n);
      sent += n;
    }
    uint32_t m = std::min<uint32_t>(receiver.contiguous_readable(), 1 + rng() % 400);
    ASSERT_LE(receiver.head() + m, 1000u);
    receiver.consume(m);
    read += m;
    sender.grant(m);
  }
  EXPECT_EQ(sent - read, receiver.readable());
  EXPECT_FALSE(receiver.arrived(1000 - receiver.readable() + 1));  // more than fits
}

TEST(RsocketCredits, DataLeavesAReserveForControl) {
  rs::MessageCredits c(rs::MessageCredits::kCtrlReserve + 1);
  EXPECT_TRUE(c.can_send_data());
  c.spend();
  EXPECT_FALSE(c.can_send_data());
  EXPECT_TRUE(c.can_send_ctrl());
  c.spend();
  c.spend();
  EXPECT_FALSE(c.can_send_ctrl());
  c.grant(5);
  EXPECT_TRUE(c.can_send_data());
}

TEST(RsocketGrants, DueAtHalfAndCappedPerMessage) {
  rs::GrantLedger ledger(384, 1u << 22);
  for (int i = 0; i < 191; ++i) ledger.message_reposted();
  EXPECT_FALSE(ledger.due());
  ledger.message_reposted();
  EXPECT_TRUE(ledger.due());
  ledger.commit(ledger.next());
  EXPECT_FALSE(ledger.due());
  ledger.bytes_read(1u << 21);  // half the ring, more than one grant carries
  EXPECT_TRUE(ledger.due());
  rs::CreditGrant g = ledger.next();
  EXPECT_EQ(g.bytes, rs::CreditGrant::kMaxBytes);
  ledger.commit(g);
  EXPECT_EQ(ledger.pending_bytes(), (1u << 21) - rs::CreditGrant::kMaxBytes);
}

// A sender that runs dry always finds a grant due at the receiver: credit
// is never stranded below the thresholds.
TEST(RsocketGrants, ASenderNeverStarvesWithCreditSittingAtTheReceiver) {
  const uint32_t q = 16, ring = 4096;
  rs::MessageCredits credits(q);
  rs::RemoteRing remote(ring, ring);
  rs::ReceiveRing receiver(ring);
  rs::GrantLedger ledger(q, ring);
  std::mt19937 rng(11);
  for (int i = 0; i < 100000; ++i) {
    if (credits.can_send_data() && remote.writable()) {
      uint32_t n = std::min<uint32_t>(remote.writable(), 1 + rng() % 700);
      remote.advance(n);
      credits.spend();
      ASSERT_TRUE(receiver.arrived(n));
      ledger.message_reposted();
    }
    // The application reads everything there is.
    while (uint32_t m = receiver.contiguous_readable()) {
      receiver.consume(m);
      ledger.bytes_read(m);
    }
    const bool stalled = !(credits.can_send_data() && remote.writable());
    if (stalled) {
      ASSERT_TRUE(ledger.due()) << "iteration " << i;
    }
    if (ledger.due()) {
      rs::CreditGrant g = ledger.next();
      ledger.commit(g);
      credits.grant(g.messages);
      remote.grant(g.bytes);
    }
  }
}

}  // namespace
