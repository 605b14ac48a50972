// Answers held for the application's next post (Engine::answers_held_ns):
// an ACK built while an application thread drained the sockets leaves in
// the same send() as that thread's next request, requests first, so that a
// ping-pong's reply and the ACK of the message it answers are one trip
// through the kernel (one UDP GSO send); with no post, the alarm sends it
// kAnswerHoldNs later, or the network thread with its answer to the peer's
// loss probe. Over the fake network
// (fake_roce_net.h): real engines, a virtual clock.
#include <gtest/gtest.h>

#include <deque>
#include <thread>

#include "fake_roce_net.h"

namespace sv::roce::fake {
namespace {

constexpr uint32_t kQpnA = 0x010011, kQpnB = 0x020022;

bool is_ack(const net::RocePacket& p) { return (p.bth.opcode & ~net::kTransportMask) == net::kAck; }
bool is_send(const net::RocePacket& p) { return net::opcode_info(p.bth.opcode)->is(net::kRequest); }

// Two ends, each with an RC QP connected to the other's; B's packets come
// through an application thread's drain.
struct PingPong {
  PingPong() : net(1), a(net.add_node(1)), b(net.add_node(2)) {
    SendParams p;
    p.sq_psn = 100;
    p.path_mtu = IBV_MTU_1024;
    p.timeout = 14;
    p.retry_cnt = 7;
    connect_rc(a, kQpnA, b, kQpnB, p, &to_b);
    connect_rc(b, kQpnB, a, kQpnA, p, &to_a);
    b.application_drains = true;
  }
  // A work request of `len` bytes from `from`'s QP to the other end's: a
  // SEND of them, or a READ of the other end's memory.
  void post(FakeNode& from, ibv_wr_opcode op, uint32_t len = 8) {
    const bool from_a = &from == &a;
    const uint32_t qpn = from_a ? kQpnA : kQpnB, peer_qpn = from_a ? kQpnB : kQpnA;
    const FakeQp& target = (from_a ? b : a).targets.qps.at(peer_qpn);
    payloads.emplace_back(len, uint8_t{0x5a});
    pieces.push_back(Piece{payloads.back().data(), len});
    Message m{};
    m.qp_type = IBV_QPT_RC;
    m.opcode = op;
    m.src_qpn = qpn;
    m.dst_qpn = peer_qpn;
    m.dst = from_a ? &to_b : &to_a;
    m.length = len;
    if (op == IBV_WR_RDMA_READ) {
      m.sink = &pieces.back();
      m.num_sink = 1;
      m.remote_addr = target.va;
      m.rkey = target.rkey;
    } else {
      m.pieces = &pieces.back();
      m.num_pieces = 1;
    }
    m.token = tokens++;
    EngineLock g(from.engine);
    from.engine.start_reliable(m);
  }
  // Steps until B's QP has received `n` SENDs.
  void until_b_received(size_t n) {
    ASSERT_TRUE(net.run_until([&] { return b.targets.qps.at(kQpnB).arrived.size() >= n; }));
  }

  FakeNet net;
  FakeNode& a;
  FakeNode& b;
  Destination to_a, to_b;
  std::deque<std::vector<uint8_t>> payloads;
  std::deque<Piece> pieces;
  uint64_t tokens = 0;
};

TEST(RoceHeldAnswers, TheAckLeavesWithTheNextRequestInOneSend) {
  PingPong p;
  p.post(p.a, IBV_WR_SEND);
  p.until_b_received(1);
  // B's application has its message; the ACK waits for its reply.
  EXPECT_TRUE(p.b.wire.sends.empty());
  EXPECT_TRUE(p.b.engine.answers_held.load());
  p.post(p.b, IBV_WR_SEND);
  ASSERT_EQ(p.b.wire.sends.size(), 1u);
  const std::vector<net::RocePacket>& call = p.b.wire.sends[0];
  ASSERT_EQ(call.size(), 2u);
  EXPECT_TRUE(is_send(call[0]));  // the reply first: as long or longer, the head of one GSO send
  EXPECT_TRUE(is_ack(call[1]));
  EXPECT_EQ(call[1].bth.psn, 100u);
  EXPECT_FALSE(p.b.engine.answers_held.load());
  // softverbs-stat shows it: B's one answer was carried by its reply.
  EXPECT_EQ(p.b.count(kAnswersCarried), 1u);
  EXPECT_EQ(p.b.count(kAnswersAlone), 0u);
  // Both messages complete, nothing sent twice.
  ASSERT_TRUE(p.net.run_until([&] { return p.a.completions.size() == 1 && p.b.completions.size() == 1; }));
  EXPECT_EQ(p.a.completions[0].response.outcome, Outcome::kAck);
  EXPECT_EQ(p.b.completions[0].response.outcome, Outcome::kAck);
  EXPECT_EQ(p.a.count(kRetransmits) + p.a.count(kProbes) + p.b.count(kRetransmits) + p.b.count(kProbes), 0u);
}

TEST(RoceHeldAnswers, WithNoPostTheAckStillComes) {
  PingPong p;
  p.post(p.a, IBV_WR_SEND);
  p.until_b_received(1);
  const uint64_t arrived = p.net.now_ns();
  p.b.application_drains = false;  // it stopped polling: B's network thread takes what comes
  ASSERT_TRUE(p.net.run_until([&] { return p.a.completions.size() == 1; }));
  EXPECT_EQ(p.a.completions[0].response.outcome, Outcome::kAck);
  // Within kAnswerHoldNs (then one delay of the fake wire): the alarm's.
  EXPECT_LE(p.net.now_ns(), arrived + kAnswerHoldNs + 2 * p.net.impair.delay_ns);
  EXPECT_EQ(p.b.targets.qps.at(kQpnB).arrived.size(), 1u);
  EXPECT_EQ(p.a.count(kRetransmits) + p.a.count(kAckTimeouts), 0u);
  EXPECT_FALSE(p.b.engine.answers_held.load());
}

// A lone message's answer may be held up to kAnswerHoldNs: A's loss probe
// waits that out (RFC 8985's tail loss probe waits out a delayed ACK the
// same way). Sent sooner, it was sent for nothing, and drew an ACK alone:
// ~3% of ib_write_lat's messages between two users of one host, and its
// typical latency 35-60 us instead of 4-5.
TEST(RoceHeldAnswers, ALoneMessageIsNotProbedWhileItsAnswerMayBeHeld) {
  PingPong p;
  p.post(p.a, IBV_WR_SEND);
  p.until_b_received(1);
  ASSERT_TRUE(p.b.engine.answers_held.load());
  // B's application neither posts nor polls again: the alarm sends the ACK.
  ASSERT_TRUE(p.net.run_until([&] { return p.a.completions.size() == 1; }));
  EXPECT_EQ(p.a.completions[0].response.outcome, Outcome::kAck);
  EXPECT_EQ(p.a.count(kProbes), 0u);
  EXPECT_EQ(p.b.count(kDuplicates), 0u);
}

// With more than one message unanswered, answers are not held back that
// long (the responder's thread answers a stream as it comes): a lost
// answer is probed for after a few round trips, as before.
TEST(RoceHeldAnswers, WithTwoMessagesUnansweredTheProbeComesSoon) {
  PingPong p;
  p.b.application_drains = false;
  p.post(p.a, IBV_WR_SEND);  // a round trip measured first (before it, A guesses 250 us)
  ASSERT_TRUE(p.net.run_until([&] { return p.a.completions.size() == 1; }));
  p.net.drop_once(is_ack);
  p.net.drop_once(is_ack);
  const uint64_t start = p.net.now_ns();
  p.post(p.a, IBV_WR_SEND);
  p.post(p.a, IBV_WR_SEND);
  ASSERT_TRUE(p.net.run_until([&] { return p.a.completions.size() == 3; }));
  EXPECT_GE(p.a.count(kProbes), 1u);
  EXPECT_LT(p.net.now_ns() - start, kAnswerHoldNs);
}

TEST(RoceHeldAnswers, TheAlarmIsArmedForThemWhenNothingElseIsDue) {
  PingPong p;
  // B's application drains a SEND when B has nothing of its own in flight:
  // the held ACK is the next deadline.
  p.post(p.a, IBV_WR_SEND);
  p.until_b_received(1);
  ASSERT_TRUE(p.b.engine.answers_held.load());
  EXPECT_EQ(p.b.engine.next_deadline(), p.net.now_ns() + kAnswerHoldNs);
}

TEST(RoceHeldAnswers, AFullBatchTakesThemAndLeavesNoDeadlineBehind) {
  PingPong p;
  p.post(p.a, IBV_WR_SEND);
  p.until_b_received(1);
  ASSERT_TRUE(p.b.engine.answers_held.load());  // one ACK held
  // Then B's network thread answers a READ with 64 packets: the held ACK
  // and 63 of them fill a batch, which leaves as the 64th is built.
  p.b.application_drains = false;
  p.post(p.a, IBV_WR_RDMA_READ, 64 * 1024);
  ASSERT_TRUE(p.net.run_until([&] { return p.a.completions.size() == 2; }));
  EXPECT_EQ(p.a.completions[0].response.outcome, Outcome::kAck);
  EXPECT_EQ(p.a.completions[1].response.outcome, Outcome::kAck);
  ASSERT_GE(p.b.wire.sends.size(), 1u);
  ASSERT_EQ(p.b.wire.sends[0].size(), 64u);
  EXPECT_TRUE(is_ack(p.b.wire.sends[0][0]));  // the held ACK first: the stream keeps its order
  EXPECT_GE(p.b.count(kAnswersAlone), 64u);  // a full batch of answers leaves without a request
  EXPECT_FALSE(p.b.engine.answers_held.load());
  // Nothing is held, so nothing is due: a deadline left behind would wake
  // the network thread over and over, its time long past.
  EXPECT_EQ(p.b.engine.next_deadline(), 0u);
}

TEST(RoceHeldAnswers, SendHeldAnswersSendsThemAtOnce) {
  PingPong p;
  p.post(p.a, IBV_WR_SEND);
  p.until_b_received(1);
  ASSERT_TRUE(p.b.wire.sends.empty());
  p.b.engine.send_held_answers();  // a QP destroyed, the process exiting, the next drain
  ASSERT_EQ(p.b.wire.sends.size(), 1u);
  ASSERT_EQ(p.b.wire.sends[0].size(), 1u);
  EXPECT_TRUE(is_ack(p.b.wire.sends[0][0]));
  EXPECT_FALSE(p.b.engine.answers_held.load());
  EXPECT_EQ(p.b.count(kAnswersAlone), 1u);
  EXPECT_EQ(p.b.count(kAnswersCarried), 0u);
}

TEST(RoceHeldAnswers, TheNetworkThreadHoldsNothing) {
  PingPong p;
  p.b.application_drains = false;
  p.post(p.a, IBV_WR_SEND);
  p.until_b_received(1);
  ASSERT_EQ(p.b.wire.sends.size(), 1u);  // the ACK, at once
  EXPECT_TRUE(is_ack(p.b.wire.sends[0][0]));
  EXPECT_FALSE(p.b.engine.answers_held.load());
  EXPECT_EQ(p.b.count(kAnswersAlone), 1u);  // a second trip, which softverbs-stat shows
}

// In a DeferSends scope (a post under its QP's send queue lock), the
// engine's packets wait for the scope's end: the system call comes after
// the lock is let go (core/deferred_sends.h), so the network thread,
// handing that QP its ACKs, does not wait out a sendmmsg.
TEST(RoceDeferredSends, PostsInAScopeLeaveAtItsEndInOneSend) {
  PingPong p;
  p.b.application_drains = false;  // (B answers at once: A's probes would say a loss)
  {
    DeferSends scope;
    for (int i = 0; i < 3; ++i) p.post(p.a, IBV_WR_SEND);
    EXPECT_TRUE(p.a.wire.sends.empty());
  }
  ASSERT_EQ(p.a.wire.sends.size(), 1u);
  EXPECT_EQ(p.a.wire.sends[0].size(), 3u);
  ASSERT_TRUE(p.net.run_until([&] { return p.a.completions.size() == 3; }));
  for (const Answer& a : p.a.completions) EXPECT_EQ(a.response.outcome, Outcome::kAck);
  EXPECT_EQ(p.a.count(kRetransmits) + p.a.count(kProbes), 0u);
}

TEST(RoceDeferredSends, AnotherThreadTakingTheLockSendsThem) {
  PingPong p;
  {
    DeferSends scope;
    p.post(p.a, IBV_WR_SEND);
    std::thread([&] { EngineLock g(p.a.engine); }).join();  // the network thread, handling a packet
    ASSERT_EQ(p.a.wire.sends.size(), 1u);
  }
  EXPECT_EQ(p.a.wire.sends.size(), 1u);  // nothing left for the scope's end
  ASSERT_TRUE(p.net.run_until([&] { return p.a.completions.size() == 1; }));
}

TEST(RoceDeferredSends, WithoutAScopeEachPostSendsAtOnce) {
  PingPong p;
  for (int i = 0; i < 3; ++i) p.post(p.a, IBV_WR_SEND);
  EXPECT_EQ(p.a.wire.sends.size(), 3u);
}

}  // namespace
}  // namespace sv::roce::fake
