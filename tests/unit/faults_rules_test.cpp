// SOFTVERBS_FAULTS' rules (core/faults.h): what they may say, and the
// reason given for what they may not.
#include "core/faults.h"

#include <gtest/gtest.h>

#include <cerrno>

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
      {"nth=3", "neither call= nor wc="},
      {"call=ibv_reg_mr,sometimes", "not key=value"},
      {"call=ibv_reg_mr,when=now", "unknown key 'when'"},
      {"wc=RETRY_EXC_ERR,opcode=RDMA_TELEPORT", "opcode: 'RDMA_TELEPORT'"},
      {"event=PORT_ERR", "event: QP_FATAL or CQ_ERR"},
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
