// Engine::finish_sends: what the engine answered has left when it returns,
// also when another thread took it from the batches and is still in its
// send() (the network thread, with a ping-pong's last ACK, while the
// application exits). Without the wait, the exit ended that thread before
// the send and the peer failed with RETRY_EXC_ERR
// (e2e_roce_rc_pingpong_stats, once in a full run).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "fake_roce_net.h"
#include "util/clock.h"

namespace sv::roce::fake {
namespace {

// A wire whose send() waits at a gate until the test opens it.
class GateWire final : public Wire {
 public:
  void send(OutDatagram*, size_t count) override {
    std::unique_lock l(mu_);
    entered_ = true;
    cv_.notify_all();
    cv_.wait(l, [&] { return open_; });
    sent_ += count;
  }
  uint16_t source_port(const in6_addr&) const override { return 49152; }
  uint32_t link_mtu(const in6_addr&, const in6_addr&) override { return 4096; }
  uint64_t now_ns() const override { return monotonic_ns(); }
  bool wake_at(uint64_t) override { return true; }

  void wait_until_entered() {
    std::unique_lock l(mu_);
    cv_.wait(l, [&] { return entered_; });
  }
  void open() {
    std::lock_guard l(mu_);
    open_ = true;
    cv_.notify_all();
  }
  size_t sent() {
    std::lock_guard l(mu_);
    return sent_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool entered_ = false, open_ = false;
  size_t sent_ = 0;
};

TEST(RoceFinishSends, WaitsForASendAnotherThreadTookFromTheBatches) {
  constexpr uint32_t kQpn = 0x010011, kPeerQpn = 0x020022;
  GateWire wire;
  FakeTargets targets;
  Engine e(wire, targets);
  e.counters.open_in_memory();
  std::vector<Answer> completions;
  RecordedAnswers answers(completions, kQpn);
  SendParams p;
  p.sq_psn = 100;
  p.path_mtu = IBV_MTU_1024;
  p.timeout = 14;
  p.retry_cnt = 7;
  {
    std::lock_guard g(e.mu);
    e.ready_to_send(kQpn, p, answers);
  }
  Destination to{};
  to.dgid.raw[15] = 2;
  to.sgid.raw[15] = 1;
  std::vector<uint8_t> payload(8, 0x5a);
  Piece piece{payload.data(), 8};
  Message m{};
  m.qp_type = IBV_QPT_RC;
  m.opcode = IBV_WR_SEND;
  m.src_qpn = kQpn;
  m.dst_qpn = kPeerQpn;
  m.dst = &to;
  m.length = 8;
  m.pieces = &piece;
  m.num_pieces = 1;

  std::thread sender([&] {
    EngineLock g(e);  // (its release takes the batch and sends it: at the gate)
    e.start_reliable(m);
  });
  wire.wait_until_entered();
  std::atomic<bool> finished{false};
  std::thread finisher([&] {
    e.finish_sends();
    finished = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(finished) << "finish_sends returned while the packet was still in another thread's hands";
  wire.open();
  sender.join();
  finisher.join();
  EXPECT_TRUE(finished);
  EXPECT_EQ(wire.sent(), 1u);
}

}  // namespace
}  // namespace sv::roce::fake
