// A first check that the fixture works: SEND between two RC QPs.
#include <gtest/gtest.h>

#include <cstring>

#include "verbs_fixture.h"

using namespace svtest;

TEST(Smoke, RcSendArrivesIntact) {
  Device dev;
  ASSERT_GE(dev.gid_index, 0);
  QpPair p(dev, IBV_QPT_RC);
  Buffer src(dev.pd, 4096), dst(dev.pd, 4096);
  for (size_t i = 0; i < 4096; ++i) src.bytes[i] = static_cast<uint8_t>(i * 7);
  ibv_sge rs = dst.sge(0, 4096);
  ibv_recv_wr rwr{};
  rwr.wr_id = 7;
  rwr.sg_list = &rs;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad;
  ASSERT_EQ(ibv_post_recv(p.b, &rwr, &rbad), 0);
  ibv_sge ss = src.sge(0, 4096);
  ibv_send_wr swr{};
  swr.wr_id = 9;
  swr.sg_list = &ss;
  swr.num_sge = 1;
  swr.opcode = IBV_WR_SEND;
  swr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* sbad;
  ASSERT_EQ(ibv_post_send(p.a, &swr, &sbad), 0);
  auto s = poll_n(p.cq_a, 1);
  auto r = poll_n(p.cq_b, 1);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(s[0].wr_id, 9u);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(r[0].wr_id, 7u);
  EXPECT_EQ(r[0].byte_len, 4096u);
  EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(r[0].src_qp, p.a->qp_num);
  EXPECT_EQ(std::memcmp(src.bytes.data(), dst.bytes.data(), 4096), 0);
}
