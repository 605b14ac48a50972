// Packet faults on the way out (transport/roce_packet_faults.h): what each
// packet= rule does to a batch of datagrams on its way to the sockets, with
// the rules installed as SOFTVERBS_FAULTS would install them.
#include "transport/roce_packet_faults.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/faults.h"
#include "net/roce_datagram.h"

namespace sv::roce {
namespace {

// Datagrams whose BTH names QP `qpn` and opcode `opcode`, numbered by the
// byte after the BTH; what the wire sent, by those numbers.
class PacketFaultsTest : public ::testing::Test {
 protected:
  void TearDown() override { faults::replace_rules({}); }

  void rules(const char* text) {
    faults::Rules r;
    std::string why;
    ASSERT_TRUE(faults::parse(text, &r, &why)) << why;
    faults::replace_rules(std::move(r));
  }
  // A batch of datagrams numbered `first`.. to 10.93.0.2.
  std::vector<OutDatagram> batch(uint8_t first, size_t n, uint32_t qpn = 0x10001, uint8_t opcode = 0x0a) {
    std::vector<OutDatagram> d(n);
    for (size_t i = 0; i < n; ++i) {
      storage_.emplace_back(net::kDatagramHeadroom + 20, 0);
      uint8_t* p = storage_.back().data() + net::kDatagramHeadroom;
      p[0] = opcode;
      p[5] = qpn >> 16, p[6] = qpn >> 8, p[7] = qpn;
      p[12] = static_cast<uint8_t>(first + i);
      d[i].dst.s6_addr[10] = d[i].dst.s6_addr[11] = 0xff;
      d[i].dst.s6_addr[12] = 10, d[i].dst.s6_addr[13] = 93, d[i].dst.s6_addr[15] = 2;
      d[i].data = p;
      d[i].len = 20;
    }
    return d;
  }
  void send(std::vector<OutDatagram> d) {
    faults_.send(d.data(), d.size(), record(), [](OutDatagram& x) { x.unsealed = false; });
  }
  PacketFaults::SendFn record() {
    return [this](OutDatagram* d, size_t n) {
      for (size_t i = 0; i < n; ++i) {
        sent_.push_back(d[i].data[12]);
        last_icrc_byte_ = d[i].data[d[i].len - 1];
      }
    };
  }
  PacketFaults faults_;
  std::vector<std::vector<uint8_t>> storage_;
  std::vector<int> sent_;
  uint8_t last_icrc_byte_ = 0;
};

TEST_F(PacketFaultsTest, WithoutAMatchingRuleABatchLeavesAsItCame) {
  rules("packet=drop,qp=0x99");
  send(batch(1, 4));
  EXPECT_EQ(sent_, (std::vector<int>{1, 2, 3, 4}));
}

TEST_F(PacketFaultsTest, TheNthPacketIsDroppedOrDuplicated) {
  rules("packet=drop,nth=2;packet=duplicate,nth=3");
  send(batch(1, 4));
  // (Rules are tried in order: the drop rule counts every packet, the
  // duplicate rule those the drop rule let through.)
  EXPECT_EQ(sent_, (std::vector<int>{1, 3, 4, 4}));
}

TEST_F(PacketFaultsTest, AReorderedPacketGoesAfterTheNextBatch) {
  rules("packet=reorder,nth=2");
  send(batch(1, 3));
  EXPECT_EQ(sent_, (std::vector<int>{1, 3}));
  send(batch(4, 1));
  EXPECT_EQ(sent_, (std::vector<int>{1, 3, 4, 2}));
  EXPECT_EQ(faults_.next_due(), UINT64_MAX);
}

TEST_F(PacketFaultsTest, ADelayedPacketLeavesWhenDue) {
  rules("packet=delay,delay=50,nth=1");
  send(batch(1, 2));
  EXPECT_EQ(sent_, (std::vector<int>{2}));
  const uint64_t due = faults_.next_due();
  ASSERT_NE(due, UINT64_MAX);
  faults_.release_due(due - 1, record());
  EXPECT_EQ(sent_, (std::vector<int>{2}));
  faults_.release_due(due, record());
  EXPECT_EQ(sent_, (std::vector<int>{2, 1}));
}

TEST_F(PacketFaultsTest, ACorruptedPacketLeavesWithAnotherIcrcAndARingsPacketIsLost) {
  rules("packet=corrupt,every=1");
  send(batch(1, 1));
  ASSERT_EQ(sent_, (std::vector<int>{1}));
  EXPECT_NE(last_icrc_byte_, 0);  // (it was 0)
  std::vector<OutDatagram> ring = batch(2, 1);
  ring[0].unsealed = true;  // (built for a ring: no ICRC to break, and a ring checks none)
  send(ring);
  EXPECT_EQ(sent_, (std::vector<int>{1}));
}

TEST_F(PacketFaultsTest, RulesNarrowedByPeerQpAndOpcode) {
  rules("packet=drop,peer=10.93.0.9;packet=drop,qp=0x10002;packet=drop,opcode=RC_ACKNOWLEDGE");
  send(batch(1, 1));                    // to 10.93.0.2, QP 0x10001, a WRITE: passes
  send(batch(2, 1, 0x10002));           // that QP: dropped
  send(batch(3, 1, 0x10001, 0x11));     // an ACK: dropped
  EXPECT_EQ(sent_, (std::vector<int>{1}));
}

TEST_F(PacketFaultsTest, InboundRulesLeaveTheWayOutAlone) {
  rules("packet=drop,dir=in");
  send(batch(1, 2));
  EXPECT_EQ(sent_, (std::vector<int>{1, 2}));
  EXPECT_EQ(faults::packet_fault(true, in6_addr{}, 1, 0).fault, faults::PacketFault::kDrop);
}

}  // namespace
}  // namespace sv::roce
