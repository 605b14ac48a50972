// SOFTVERBS_FAULTS' rules (core/faults.h): what they may say, and the
// reason given for what they may not.
#include "core/faults.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>

namespace sv::faults {
namespace {

TEST(FaultRules, CallsCompletionsTriggersAndTheSeed) {
  Rules r;
  std::string why;
  ASSERT_TRUE(parse("call=ibv_reg_mr,errno=EAGAIN,nth=3; wc=IBV_WC_REM_OP_ERR,opcode=RDMA_READ,qp=0x10004,every=5,"
                    "count=2\n# a comment\nwc=RNR_RETRY_EXC_ERR,p=0.5,seed=9\ncall=ibv_post_recv,after=1.5",
                    &r, &why))
      << why;
  ASSERT_EQ(r.rules.size(), 4u);
  EXPECT_EQ(r.seed, 9u);
  EXPECT_EQ(r.rules[0].call, Call::kRegMr);
  EXPECT_EQ(r.rules[0].err, EAGAIN);
  EXPECT_EQ(r.rules[0].nth, 3u);
  EXPECT_EQ(r.rules[0].count, 1u);  // the Nth: once
  EXPECT_TRUE(r.rules[1].completion);
  EXPECT_EQ(r.rules[1].status, IBV_WC_REM_OP_ERR);
  EXPECT_EQ(r.rules[1].opcode, IBV_WR_RDMA_READ);
  EXPECT_EQ(r.rules[1].qpn, 0x10004);
  EXPECT_EQ(r.rules[1].every, 5u);
  EXPECT_EQ(r.rules[1].count, 2u);
  EXPECT_EQ(r.rules[2].status, IBV_WC_RNR_RETRY_EXC_ERR);
  EXPECT_DOUBLE_EQ(r.rules[2].p, 0.5);
  EXPECT_EQ(r.rules[3].call, Call::kPostRecv);
  EXPECT_EQ(r.rules[3].err, ENOMEM);  // the default errno
  EXPECT_EQ(r.rules[3].after_ns, 1'500'000'000u);
}

TEST(FaultRules, PacketRules) {
  Rules r;
  std::string why;
  ASSERT_TRUE(parse("packet=drop,p=0.01;packet=corrupt,dir=in,peer=10.93.0.2,opcode=RC_ACKNOWLEDGE;"
                    "packet=delay,delay=2.5,qp=0x20001,every=10;packet=dup,peer=fd93::1,opcode=0x64",
                    &r, &why))
      << why;
  ASSERT_EQ(r.rules.size(), 4u);
  EXPECT_EQ(r.rules[0].packet, PacketFault::kDrop);
  EXPECT_FALSE(r.rules[0].inbound);
  EXPECT_TRUE(r.rules[0].any_peer);
  EXPECT_EQ(r.rules[1].packet, PacketFault::kCorrupt);
  EXPECT_TRUE(r.rules[1].inbound);
  EXPECT_FALSE(r.rules[1].any_peer);
  const uint8_t v4[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 93, 0, 2};  // ::ffff:10.93.0.2
  EXPECT_EQ(std::memcmp(r.rules[1].peer.s6_addr, v4, 16), 0);
  EXPECT_EQ(r.rules[1].opcode, 0x11);  // RC ACKNOWLEDGE
  EXPECT_EQ(r.rules[2].packet, PacketFault::kDelay);
  EXPECT_EQ(r.rules[2].delay_ns, 2'500'000u);
  EXPECT_EQ(r.rules[2].qpn, 0x20001);
  EXPECT_EQ(r.rules[3].packet, PacketFault::kDuplicate);
  EXPECT_EQ(r.rules[3].peer.s6_addr[0], 0xfd);
  EXPECT_EQ(r.rules[3].opcode, 0x64);  // UD SEND_ONLY
}

TEST(FaultRules, LibrdmacmCalls) {
  Rules r;
  std::string why;
  ASSERT_TRUE(parse("call=rdma_connect,errno=ECONNREFUSED,nth=2;call=rdma_resolve_addr,errno=EHOSTUNREACH", &r, &why))
      << why;
  ASSERT_EQ(r.rules.size(), 2u);
  EXPECT_EQ(r.rules[0].call, Call::kRdmaConnect);
  EXPECT_EQ(r.rules[0].err, ECONNREFUSED);
  EXPECT_TRUE(is_rdmacm_call(r.rules[0].call));
  EXPECT_STREQ(call_name(r.rules[1].call), "rdma_resolve_addr");
  EXPECT_EQ(r.rules[1].err, EHOSTUNREACH);
  EXPECT_FALSE(is_rdmacm_call(Call::kRegMr));
}

TEST(FaultRules, ASeedAloneIsNoRule) {
  Rules r;
  std::string why;
  ASSERT_TRUE(parse("seed=42", &r, &why)) << why;
  EXPECT_TRUE(r.rules.empty());
  EXPECT_EQ(r.seed, 42u);
}

TEST(FaultRules, MistakesAreRefusedWithTheRuleAndTheReason) {
  struct Case {
    const char* text;
    const char* reason;
  } cases[] = {
      {"call=ibv_open_device", "no verbs call 'ibv_open_device'"},
      {"wc=SUCCESS", "no completion status 'SUCCESS'"},
      {"wc=RETRY_EXC_ERR,errno=ENOMEM", "errno= is for call= rules"},
      {"call=ibv_reg_mr,opcode=SEND", "opcode= and qp= are for wc= rules"},
      {"call=ibv_reg_mr,nth=0", "nth: a number from 1"},
      {"wc=RETRY_EXC_ERR,p=2", "p: a probability"},
      {"nth=3", "none of call=, wc=, late=, event=, vanish=, packet=, port="},
      {"late=5,wc=REM_OP_ERR", "wc= or late=, not both"},
      {"late=0", "late: milliseconds"},
      {"port=down,nth=3", "port=down takes after= and for= only"},
      {"port=up", "port: down, not 'up'"},
      {"packet=drop,for=2", "for= is for port= rules"},
      {"vanish=quietly", "vanish: kill"},
      {"packet=vanish", "packet: drop, duplicate, reorder, delay or corrupt"},
      {"packet=delay,dir=in", "dir=in: drop, duplicate or corrupt"},
      {"packet=drop,dir=sideways", "dir: in or out"},
      {"packet=drop,peer=host.example", "peer: an IPv4 or IPv6 address"},
      {"packet=drop,opcode=RC_TELEPORT", "opcode: no BTH opcode 'RC_TELEPORT'"},
      {"packet=drop,errno=EIO", "errno= is for call= rules"},
      {"call=ibv_reg_mr,peer=10.0.0.1", "dir=, peer= and delay= are for packet= rules"},
      {"wc=RETRY_EXC_ERR,packet=drop", "one of call=, wc=, event=, vanish=, packet=, port= in a rule"},
      {"call=ibv_reg_mr,sometimes", "not key=value"},
      {"call=ibv_reg_mr,when=now", "unknown key 'when'"},
      {"wc=RETRY_EXC_ERR,opcode=RDMA_TELEPORT", "opcode: 'RDMA_TELEPORT'"},
      {"event=PORT_ERR", "event: QP_FATAL, CQ_ERR or DEVICE_FATAL"},
      {"event=QP_FATAL,errno=EIO", "errno= is for call= rules"},
  };
  for (const Case& c : cases) {
    Rules r;
    std::string why;
    EXPECT_FALSE(parse(std::string("seed=1;") + c.text, &r, &why)) << c.text;
    EXPECT_NE(why.find("rule 2"), std::string::npos) << why;
    EXPECT_NE(why.find(c.reason), std::string::npos) << c.text << ": " << why;
  }
}

}  // namespace
}  // namespace sv::faults
