// The data path in one process: SEND / SEND_WITH_IMM / inline / SGLs on RC,
// UC and UD, the UD GRH and address handles from completions, posting
// errors, error completions and flushes, RNR and transport retries, SRQs,
// RDMA WRITE / READ, and the ibv_qp_ex (ibv_wr_*) post API.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "verbs_fixture.h"
#include "verbs_test_util.h"

using namespace svtest;
using namespace svtest::util;

namespace {

uint32_t grh_of(ibv_qp_type t) { return t == IBV_QPT_UD ? kGrh : 0; }

ibv_qp_cap cap_of(ibv_qp* qp) {
  ibv_qp_attr a{};
  ibv_qp_init_attr ia{};
  EXPECT_EQ(ibv_query_qp(qp, &a, IBV_QP_CAP, &ia), 0);
  return ia.cap;
}

std::string status_str(const std::vector<ibv_wc>& w, size_t i) {
  return i < w.size() ? ibv_wc_status_str(w[i].status) : "none";
}

class PerType : public ::testing::TestWithParam<ibv_qp_type> {};
auto type_name = [](const ::testing::TestParamInfo<ibv_qp_type>& i) { return std::string(qpt_name(i.param)); };

// ================================================================ SEND family

TEST_P(PerType, SendArrivesIntact) {
  const ibv_qp_type t = GetParam();
  Device dev;
  QpPair p(dev, t);
  const uint32_t g = grh_of(t);
  Buffer src(dev.pd, 2048), dst(dev.pd, 2048 + g);
  fill_pattern(src.bytes.data(), 2048, 1);
  ASSERT_EQ(post_recv(p.b, 7, dst.sge(0, 1000 + g)), 0);
  ibv_sge ss = src.sge(0, 1000);
  ASSERT_EQ(send_a_to_b(p, 9, &ss, 1), 0);
  auto s = wait_wc(p.cq_a, 1), r = wait_wc(p.cq_b, 1);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << status_str(s, 0);
  EXPECT_EQ(s[0].wr_id, 9u);
  EXPECT_EQ(s[0].opcode, IBV_WC_SEND);
  EXPECT_EQ(s[0].qp_num, p.a->qp_num);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << status_str(r, 0);
  EXPECT_EQ(r[0].wr_id, 7u);
  EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(r[0].byte_len, 1000u + g);
  EXPECT_EQ(r[0].qp_num, p.b->qp_num);
  EXPECT_FALSE(r[0].wc_flags & IBV_WC_WITH_IMM);
  if (t == IBV_QPT_UD) {
    EXPECT_EQ(r[0].src_qp, p.a->qp_num);
    EXPECT_TRUE(r[0].wc_flags & IBV_WC_GRH);
  }
  EXPECT_EQ(std::memcmp(dst.bytes.data() + g, src.bytes.data(), 1000), 0);
}

TEST_P(PerType, SendWithImmediate) {
  const ibv_qp_type t = GetParam();
  Device dev;
  QpPair p(dev, t);
  const uint32_t g = grh_of(t);
  Buffer src(dev.pd, 256), dst(dev.pd, 256 + g);
  fill_pattern(src.bytes.data(), 256, 2);
  ASSERT_EQ(post_recv(p.b, 1, dst.sge(0, 256 + g)), 0);
  ibv_sge ss = src.sge(0, 200);
  ASSERT_EQ(send_a_to_b(p, 2, &ss, 1, IBV_SEND_SIGNALED, IBV_WR_SEND_WITH_IMM, htonl(0x12345678)), 0);
  auto s = wait_wc(p.cq_a, 1), r = wait_wc(p.cq_b, 1);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(s[0].opcode, IBV_WC_SEND);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(r[0].opcode, IBV_WC_RECV);
  EXPECT_TRUE(r[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(r[0].imm_data), 0x12345678u);
  EXPECT_EQ(r[0].byte_len, 200u + g) << "byte_len does not count the immediate";
  EXPECT_EQ(std::memcmp(dst.bytes.data() + g, src.bytes.data(), 200), 0);
}

TEST_P(PerType, InlineSendFromUnregisteredMemory) {
  const ibv_qp_type t = GetParam();
  Device dev;
  QpPair p(dev, t);
  const uint32_t g = grh_of(t);
  Buffer dst(dev.pd, 256);
  uint8_t stack_src[48];
  fill_pattern(stack_src, sizeof stack_src, 3);
  ASSERT_EQ(post_recv(p.b, 1, dst.sge(0, 100 + g)), 0);
  ibv_sge ss{reinterpret_cast<uint64_t>(stack_src), sizeof stack_src, 0 /* no MR */};
  ASSERT_EQ(send_a_to_b(p, 2, &ss, 1, IBV_SEND_SIGNALED | IBV_SEND_INLINE), 0);
  std::memset(stack_src, 0xee, sizeof stack_src);  // inline data was copied at post time
  auto s = wait_wc(p.cq_a, 1), r = wait_wc(p.cq_b, 1);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << status_str(s, 0);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << status_str(r, 0);
  EXPECT_EQ(r[0].byte_len, 48u + g);
  EXPECT_TRUE(has_pattern(dst.bytes.data() + g, 48, 3));
}

TEST_P(PerType, ScatterGatherListsWithOddLengths) {
  const ibv_qp_type t = GetParam();
  Device dev;
  QpPair p(dev, t);
  const uint32_t g = grh_of(t);
  Buffer src(dev.pd, 4096), dst(dev.pd, 4096);
  fill_pattern(src.bytes.data(), 4096, 4);
  ibv_sge ss[3] = {src.sge(3, 7), src.sge(100, 13), src.sge(1001, 101)};  // 121 bytes
  const uint32_t total = 7 + 13 + 101;
  // Receive side: 3 SGEs with gaps between them (which must stay zero).
  ibv_sge rs[3] = {dst.sge(0, g + 5), dst.sge(500, 11), dst.sge(1500, 300)};
  ASSERT_EQ(post_recv(p.b, 1, rs, 3), 0);
  ASSERT_EQ(send_a_to_b(p, 2, ss, 3), 0);
  auto s = wait_wc(p.cq_a, 1), r = wait_wc(p.cq_b, 1);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << status_str(s, 0);
  ASSERT_EQ(r[0].status, IBV_WC_SUCCESS) << status_str(r, 0);
  EXPECT_EQ(r[0].byte_len, total + g);
  std::vector<uint8_t> sent;
  for (auto& e : ss) sent.insert(sent.end(), src.bytes.begin() + (e.addr - src.addr()),
                                 src.bytes.begin() + (e.addr - src.addr()) + e.length);
  const uint8_t* d = dst.bytes.data();
  EXPECT_EQ(std::memcmp(d + g, sent.data(), 5), 0);
  EXPECT_EQ(std::memcmp(d + 500, sent.data() + 5, 11), 0);
  EXPECT_EQ(std::memcmp(d + 1500, sent.data() + 16, total - 16), 0);
  for (size_t i = g + 5; i < 500; ++i) ASSERT_EQ(d[i], 0) << "gap byte " << i;
  for (size_t i = 511; i < 1500; ++i) ASSERT_EQ(d[i], 0) << "gap byte " << i;
  for (size_t i = 1500 + total - 16; i < 4096; ++i) ASSERT_EQ(d[i], 0) << "byte after the message " << i;
}

TEST_P(PerType, ManyMessagesArriveInOrder) {
  const ibv_qp_type t = GetParam();
  Device dev;
  QpPair p(dev, t);
  const uint32_t g = grh_of(t);
  constexpr int kBatch = 32, kBatches = 8;
  Buffer src(dev.pd, kBatch * 16), dst(dev.pd, kBatch * 64);
  std::vector<uint64_t> send_ids, recv_ids;
  for (int b = 0; b < kBatches; ++b) {
    for (int i = 0; i < kBatch; ++i) ASSERT_EQ(post_recv(p.b, b * kBatch + i, dst.sge(i * 64, 64)), 0);
    for (int i = 0; i < kBatch; ++i) {
      uint32_t v = b * kBatch + i;
      std::memcpy(src.bytes.data() + i * 16, &v, 4);
      ibv_sge s = src.sge(i * 16, 16);
      ASSERT_EQ(send_a_to_b(p, v, &s, 1), 0);
    }
    auto s = wait_wc(p.cq_a, kBatch), r = wait_wc(p.cq_b, kBatch);
    ASSERT_EQ(s.size(), size_t(kBatch));
    ASSERT_EQ(r.size(), size_t(kBatch));
    for (int i = 0; i < kBatch; ++i) {
      EXPECT_EQ(s[i].status, IBV_WC_SUCCESS);
      EXPECT_EQ(r[i].status, IBV_WC_SUCCESS);
      send_ids.push_back(s[i].wr_id);
      recv_ids.push_back(r[i].wr_id);
      uint32_t v;
      std::memcpy(&v, dst.bytes.data() + (r[i].wr_id % kBatch) * 64 + g, 4);
      EXPECT_EQ(v, r[i].wr_id) << "message landed in the wrong receive";
    }
  }
  for (size_t i = 0; i < send_ids.size(); ++i) {
    ASSERT_EQ(send_ids[i], i);
    ASSERT_EQ(recv_ids[i], i);
  }
}

TEST_P(PerType, OnlySignaledSendsComplete) {
  const ibv_qp_type t = GetParam();
  Device dev;
  QpPair p(dev, t);
  Buffer src(dev.pd, 64), dst(dev.pd, 6 * 128);
  for (int i = 0; i < 6; ++i) ASSERT_EQ(post_recv(p.b, i, dst.sge(i * 128, 128)), 0);
  for (int i = 0; i < 6; ++i) {
    ibv_sge s = src.sge(0, 32);
    ASSERT_EQ(send_a_to_b(p, i, &s, 1, i % 3 == 2 ? IBV_SEND_SIGNALED : 0), 0);
  }
  auto s = wait_wc(p.cq_a, 2);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].wr_id, 2u);
  EXPECT_EQ(s[1].wr_id, 5u);
  EXPECT_TRUE(drain(p.cq_a, 20).empty()) << "unsignaled sends produced completions";
  auto r = wait_wc(p.cq_b, 6);
  EXPECT_EQ(r.size(), 6u);
}

INSTANTIATE_TEST_SUITE_P(Qpt, PerType, ::testing::Values(IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD), type_name);

// ================================================================ UD specifics

TEST(Ud, ReceiveStartsWithGrhAndAhFromWcReachesTheSender) {
  Device dev;
  QpPair p(dev, IBV_QPT_UD);
  Buffer src(dev.pd, 256), dst(dev.pd, 512), back(dev.pd, 512);
  fill_pattern(src.bytes.data(), 256, 5);
  std::memset(dst.bytes.data(), 0xaa, 512);
  ASSERT_EQ(post_recv(p.b, 1, dst.sge(0, 512)), 0);
  ibv_sge ss = src.sge(0, 100);
  ASSERT_EQ(send_a_to_b(p, 2, &ss, 1), 0);
  auto asend = wait_wc(p.cq_a, 1), r = wait_wc(p.cq_b, 1);
  ASSERT_EQ(asend.size(), 1u);
  EXPECT_EQ(asend[0].wr_id, 2u);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(r[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(r[0].wc_flags & IBV_WC_GRH);
  EXPECT_EQ(r[0].byte_len, 100u + kGrh);
  EXPECT_EQ(r[0].src_qp, p.a->qp_num);
  EXPECT_TRUE(has_pattern(dst.bytes.data() + kGrh, 100, 5));
  // On a RoCE port the completion's sl holds the packet's L3 header type as
  // mlx5 reports it (2: IPv4). UCX's UD transport reads the destination
  // from the last 4 bytes of the GRH only then; otherwise it compares the
  // last 16 with its GIDs and drops the datagram (ud_verbs never delivered).
  EXPECT_EQ(r[0].sl & 7, 2) << "IPv4 RoCEv2 packet";

  // RoCEv2 over IPv4: 20 unused bytes, then the IPv4 header.
  const uint8_t* h = dst.bytes.data();
  for (int i = 0; i < 20; ++i) EXPECT_EQ(h[i], 0) << "byte " << i;
  const uint8_t* ip = h + 20;
  EXPECT_EQ(ip[0], 0x45) << "IPv4, 20-byte header";
  EXPECT_EQ(ip[9], 17) << "protocol UDP";
  EXPECT_GE(ntohs(*reinterpret_cast<const uint16_t*>(ip + 2)), 20u + 8u + 100u) << "total length";
  in_addr lo;
  inet_pton(AF_INET, "127.0.0.1", &lo);
  EXPECT_EQ(std::memcmp(ip + 12, &lo, 4), 0) << "source 127.0.0.1";
  EXPECT_EQ(std::memcmp(ip + 16, &lo, 4), 0) << "destination 127.0.0.1";
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (ip[i] << 8) | ip[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  EXPECT_EQ(sum, 0xffffu) << "IPv4 header checksum (rdma-core checks it to tell IPv4 from IPv6)";

  ibv_ah_attr aa{};
  ASSERT_EQ(ibv_init_ah_from_wc(dev.ctx, 1, &r[0], reinterpret_cast<ibv_grh*>(dst.bytes.data()), &aa), 0);
  EXPECT_EQ(aa.is_global, 1);
  EXPECT_EQ(aa.port_num, 1);
  EXPECT_EQ(aa.grh.sgid_index, dev.gid_index);
  ibv_gid want{};
  want.raw[10] = want.raw[11] = 0xff;
  std::memcpy(want.raw + 12, &lo, 4);
  EXPECT_EQ(std::memcmp(&aa.grh.dgid, &want, sizeof want), 0);

  ibv_ah* ah = ibv_create_ah_from_wc(dev.pd, &r[0], reinterpret_cast<ibv_grh*>(dst.bytes.data()), 1);
  ASSERT_NE(ah, nullptr) << strerror(errno);
  ASSERT_EQ(post_recv(p.a, 3, back.sge(0, 512)), 0);
  ibv_sge bs = src.sge(128, 64);
  ibv_send_wr wr = make_wr(4, &bs, 1);
  set_ud(wr, ah, r[0].src_qp);
  ASSERT_EQ(post_send(p.b, &wr), 0);
  auto bsend = wait_wc(p.cq_b, 1), brecv = wait_wc(p.cq_a, 1);
  ASSERT_EQ(bsend.size(), 1u);
  EXPECT_EQ(bsend[0].status, IBV_WC_SUCCESS);
  ASSERT_EQ(brecv.size(), 1u);
  EXPECT_EQ(brecv[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(brecv[0].wr_id, 3u);
  EXPECT_EQ(brecv[0].src_qp, p.b->qp_num);
  EXPECT_EQ(std::memcmp(back.bytes.data() + kGrh, src.bytes.data() + 128, 64), 0);
  EXPECT_EQ(ibv_destroy_ah(ah), 0);
}

// IBTA C10-93.1.1: a UD message longer than the path MTU completes
// successfully at the sender and is not delivered.
TEST(Ud, MessageLargerThanMtuIsNotDelivered) {
  struct Case {
    uint32_t len;
    bool delivered;
  } cases[] = {{4096, true}, {4097, false}, {8192, false}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.len);
    Device dev;
    QpPair p(dev, IBV_QPT_UD);
    Buffer src(dev.pd, 8192), dst(dev.pd, 8192 + kGrh);
    fill_pattern(src.bytes.data(), 8192, 6);
    ASSERT_EQ(post_recv(p.b, 1, dst.sge(0, 8192 + kGrh)), 0);
    ibv_sge ss = src.sge(0, c.len);
    ASSERT_EQ(send_a_to_b(p, 2, &ss, 1), 0);
    auto s = wait_wc(p.cq_a, 1);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << status_str(s, 0);
    auto r = c.delivered ? wait_wc(p.cq_b, 1) : drain(p.cq_b, 30);
    if (c.delivered) {
      ASSERT_EQ(r.size(), 1u);
      EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
      EXPECT_EQ(r[0].byte_len, c.len + kGrh);
    } else {
      EXPECT_TRUE(r.empty()) << "oversized UD message delivered (" << status_str(r, 0) << ")";
      // The receive is still there for the next message.
      ibv_sge small = src.sge(0, 10);
      ASSERT_EQ(send_a_to_b(p, 3, &small, 1), 0);
      auto r2 = wait_wc(p.cq_b, 1);
      ASSERT_EQ(r2.size(), 1u);
      EXPECT_EQ(r2[0].wr_id, 1u);
      EXPECT_EQ(r2[0].byte_len, 10u + kGrh);
    }
  }
}

TEST(Ud, WrongQkeyIsDropped) {
  Device dev;
  QpPair p(dev, IBV_QPT_UD);
  Buffer src(dev.pd, 64), dst(dev.pd, 512);
  fill_pattern(src.bytes.data(), 64, 7);
  ASSERT_EQ(post_recv(p.b, 1, dst.sge(0, 256)), 0);
  ibv_sge ss = src.sge(0, 32);
  ibv_send_wr wr = make_wr(2, &ss, 1);
  set_ud(wr, p.ah_to_b, p.b->qp_num, 0x22222222);
  ASSERT_EQ(post_send(p.a, &wr), 0);
  auto s = wait_wc(p.cq_a, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << "a UD sender does not learn about the drop";
  EXPECT_TRUE(drain(p.cq_b, 30).empty()) << "message with a wrong Q_Key was delivered";
  // A Q_Key with the high bit set means "the QP's own Q_Key" (here the right one).
  ibv_send_wr wr2 = make_wr(3, &ss, 1);
  set_ud(wr2, p.ah_to_b, p.b->qp_num, 0x80000000);
  ASSERT_EQ(post_send(p.a, &wr2), 0);
  auto r = wait_wc(p.cq_b, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 1u) << "the receive was still posted";
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
}

// ================================================================ posting errors

// RDMA WRITE needs no receive on RC/UC; UD sends are dropped without one.
ibv_send_wr harmless_wr(const QpPair& p, uint64_t id, ibv_sge* sg, const Buffer& target) {
  if (p.type == IBV_QPT_UD) {
    ibv_send_wr wr = make_wr(id, sg, 1);
    set_ud(wr, p.ah_to_b, p.b->qp_num);
    return wr;
  }
  ibv_send_wr wr = make_wr(id, sg, 1, IBV_WR_RDMA_WRITE);
  wr.wr.rdma.remote_addr = target.addr();
  wr.wr.rdma.rkey = target.mr->rkey;
  return wr;
}

TEST_P(PerType, FullSendQueueIsEnomem) {
  Device dev;
  QpPair p(dev, GetParam());
  Buffer src(dev.pd, 64), target(dev.pd, 64);
  ibv_sge sg = src.sge(0, 8);
  const uint32_t n = cap_of(p.a).max_send_wr;
  ASSERT_GT(n, 0u);
  ASSERT_LE(n, 64u) << "QpPair asked for 64";
  for (uint32_t i = 0; i < n; ++i) {
    ibv_send_wr wr = harmless_wr(p, i, &sg, target);
    ASSERT_EQ(post_send(p.a, &wr), 0) << "WR " << i << " of " << n;
  }
  ibv_send_wr extra = harmless_wr(p, 999, &sg, target);
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(post_send(p.a, &extra, &bad), ENOMEM);
  EXPECT_EQ(bad, &extra);
  // Polling one completion frees one slot.
  auto w = wait_wc(p.cq_a, 1);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].wr_id, 0u);
  EXPECT_EQ(post_send(p.a, &extra), 0);
  EXPECT_EQ(post_send(p.a, &extra, &bad), ENOMEM);
  auto rest = wait_wc(p.cq_a, n);
  EXPECT_EQ(rest.size(), size_t(n));
  // A chain longer than the queue: *bad_wr is the first WR that did not fit.
  std::vector<ibv_send_wr> chain;
  for (uint32_t i = 0; i <= n; ++i) chain.push_back(harmless_wr(p, 2000 + i, &sg, target));
  for (uint32_t i = 0; i < n; ++i) chain[i].next = &chain[i + 1];
  bad = nullptr;
  EXPECT_EQ(post_send(p.a, chain.data(), &bad), ENOMEM);
  EXPECT_EQ(bad, &chain[n]);
  auto posted = wait_wc(p.cq_a, n);
  EXPECT_EQ(posted.size(), size_t(n)) << "the WRs before *bad_wr are posted";
  EXPECT_TRUE(drain(p.cq_a, 20).empty()) << "*bad_wr and later WRs must not be posted";
}

TEST(PostSend, InvalidOpcodeForTheQpType) {
  struct Case {
    const char* name;
    ibv_qp_type type;
    int op;  // an int: some rows hold values that are not valid ibv_wr_opcode
  } cases[] = {
      {"uc_rdma_read", IBV_QPT_UC, IBV_WR_RDMA_READ},
      {"ud_rdma_write", IBV_QPT_UD, IBV_WR_RDMA_WRITE},
      {"ud_rdma_write_imm", IBV_QPT_UD, IBV_WR_RDMA_WRITE_WITH_IMM},
      {"ud_rdma_read", IBV_QPT_UD, IBV_WR_RDMA_READ},
      {"uc_cmp_swap", IBV_QPT_UC, IBV_WR_ATOMIC_CMP_AND_SWP},
      {"uc_fetch_add", IBV_QPT_UC, IBV_WR_ATOMIC_FETCH_AND_ADD},
      {"ud_cmp_swap", IBV_QPT_UD, IBV_WR_ATOMIC_CMP_AND_SWP},
      {"ud_fetch_add", IBV_QPT_UD, IBV_WR_ATOMIC_FETCH_AND_ADD},
      {"rc_garbage_opcode", IBV_QPT_RC, 0x55},
      {"ud_garbage_opcode", IBV_QPT_UD, 0x55},
  };
  Device dev;
  std::map<ibv_qp_type, std::unique_ptr<QpPair>> pairs;
  Buffer src(dev.pd, 64), target(dev.pd, 64);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto& p = pairs[c.type];
    if (!p) p = std::make_unique<QpPair>(dev, c.type);
    ibv_sge sg = src.sge(0, 8);
    ibv_send_wr wr = make_wr(1, &sg, 1, IBV_WR_SEND);
    std::memcpy(&wr.opcode, &c.op, sizeof c.op);  // as a C program would store any int
    wr.wr.rdma.remote_addr = target.addr();
    wr.wr.rdma.rkey = target.mr->rkey;
    if (c.op == IBV_WR_ATOMIC_CMP_AND_SWP || c.op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      wr.wr.atomic.remote_addr = target.addr();
      wr.wr.atomic.rkey = target.mr->rkey;
      wr.wr.atomic.compare_add = 1;
    }
    if (c.type == IBV_QPT_UD) set_ud(wr, p->ah_to_b, p->b->qp_num);
    ibv_send_wr* bad = nullptr;
    EXPECT_EQ(post_send(p->a, &wr, &bad), EINVAL);
    EXPECT_EQ(bad, &wr);
    EXPECT_TRUE(drain(p->cq_a, 0).empty()) << "a refused WR produced a completion";
    EXPECT_EQ(qp_state(p->a), IBV_QPS_RTS) << "a refused post must not change the QP";
  }
}

TEST_P(PerType, TooManySendSgesIsEinval) {
  Device dev;
  QpPair p(dev, GetParam());
  const uint32_t max = cap_of(p.a).max_send_sge;
  Buffer src(dev.pd, 4096), target(dev.pd, 64);
  std::vector<ibv_sge> sg;
  for (uint32_t i = 0; i <= max; ++i) sg.push_back(src.sge(i * 8, 8));
  ibv_send_wr wr = harmless_wr(p, 1, sg.data(), target);
  wr.num_sge = static_cast<int>(max + 1);
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(post_send(p.a, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  wr.num_sge = static_cast<int>(max);  // exactly the maximum is fine
  EXPECT_EQ(post_send(p.a, &wr, &bad), 0);
  EXPECT_EQ(wait_wc(p.cq_a, 1).size(), 1u);
}

TEST_P(PerType, InlineDataAboveMaxInlineIsEinval) {
  Device dev;
  QpPair p(dev, GetParam());
  const uint32_t max = cap_of(p.a).max_inline_data;
  ASSERT_GE(max, 64u) << "QpPair asked for 64";
  std::vector<uint8_t> data(max + 1, 0x11);
  Buffer target(dev.pd, max + 64);
  ibv_sge sg{reinterpret_cast<uint64_t>(data.data()), max + 1, 0};
  ibv_send_wr wr = harmless_wr(p, 1, &sg, target);
  wr.send_flags |= IBV_SEND_INLINE;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(post_send(p.a, &wr, &bad), EINVAL);
  EXPECT_EQ(bad, &wr);
  sg.length = max;
  EXPECT_EQ(post_send(p.a, &wr, &bad), 0);
  auto w = wait_wc(p.cq_a, 1);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].status, IBV_WC_SUCCESS);
}

TEST_P(PerType, PostSendBeforeRtsIsEinval) {
  const ibv_qp_type t = GetParam();
  Device dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 64, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  {
    ibv_qp* a = create_qp(dev.pd, t, cq, cq);
    ibv_qp* b = create_qp(dev.pd, t, cq, cq);
    ASSERT_TRUE(a && b);
    ibv_ah* ah = t == IBV_QPT_UD ? make_ah(dev.pd, dev.gid_index) : nullptr;
    ASSERT_EQ(connect_qp(b, a->qp_num), 0);
    Buffer src(dev.pd, 64), dst(dev.pd, 256);
    ASSERT_EQ(post_recv(b, 100, dst.sge(0, 256)), 0);
    ibv_sge sg = src.sge(0, 16);
    auto attempt = [&](const char* state) {
      SCOPED_TRACE(state);
      ibv_send_wr wr = make_wr(1, &sg, 1);
      if (t == IBV_QPT_UD) set_ud(wr, ah, b->qp_num);
      ibv_send_wr* bad = nullptr;
      EXPECT_EQ(post_send(a, &wr, &bad), EINVAL);
      EXPECT_EQ(bad, &wr);
    };
    attempt("RESET");
    ASSERT_EQ(to_init(a), 0);
    attempt("INIT");
    ASSERT_EQ(to_rtr(a, b->qp_num), 0);
    attempt("RTR");
    ASSERT_EQ(to_rts(a), 0);
    ibv_send_wr wr = make_wr(2, &sg, 1);
    if (t == IBV_QPT_UD) set_ud(wr, ah, b->qp_num);
    EXPECT_EQ(post_send(a, &wr), 0);
    auto w = wait_wc(cq, 2);  // a's send and b's receive
    ASSERT_EQ(w.size(), 2u);
    for (auto& c : w) EXPECT_EQ(c.status, IBV_WC_SUCCESS);
    EXPECT_TRUE(drain(cq, 20).empty()) << "a refused WR was executed later";
    if (ah) ibv_destroy_ah(ah);
    ibv_destroy_qp(a);
    ibv_destroy_qp(b);
  }
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

TEST_P(PerType, PostRecvErrors) {
  Device dev;
  QpPair p(dev, GetParam());
  const ibv_qp_cap cap = cap_of(p.b);
  Buffer dst(dev.pd, 64 * 1024);
  // Too many SGEs.
  std::vector<ibv_sge> sg;
  for (uint32_t i = 0; i <= cap.max_recv_sge; ++i) sg.push_back(dst.sge(i * 64, 64));
  ibv_recv_wr* bad = nullptr;
  EXPECT_EQ(post_recv(p.b, 1, sg.data(), static_cast<int>(cap.max_recv_sge + 1), &bad), EINVAL);
  EXPECT_NE(bad, nullptr);
  // Full receive queue.
  for (uint32_t i = 0; i < cap.max_recv_wr; ++i)
    ASSERT_EQ(post_recv(p.b, 10 + i, dst.sge(i * 128, 128)), 0) << "receive " << i << " of " << cap.max_recv_wr;
  ibv_recv_wr wr{};
  ibv_sge one = dst.sge(0, 64);
  wr.wr_id = 5000;
  wr.sg_list = &one;
  wr.num_sge = 1;
  bad = nullptr;
  EXPECT_EQ(ibv_post_recv(p.b, &wr, &bad), ENOMEM);
  EXPECT_EQ(bad, &wr);
  // A message consumes one receive: there is room again.
  Buffer src(dev.pd, 64);
  ibv_sge ss = src.sge(0, 8);
  ASSERT_EQ(send_a_to_b(p, 1, &ss, 1), 0);
  auto r = wait_wc(p.cq_b, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].wr_id, 10u);
  EXPECT_EQ(ibv_post_recv(p.b, &wr, &bad), 0);
}

// Sends message `i` (64 bytes of pattern i) from a to b and checks that it
// completed and took b's receive WQE `i`, its bytes landing at `landed`.
void send_and_expect_receive(const QpPair& p, Buffer& src, uint32_t i, const uint8_t* landed) {
  fill_pattern(src.bytes.data(), 64, i);
  ibv_sge ss = src.sge(0, 64);
  ASSERT_EQ(send_a_to_b(p, i, &ss, 1), 0);
  ASSERT_EQ(wait_wc(p.cq_a, 1).size(), 1u);
  auto r = wait_wc(p.cq_b, 1);
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(r[0].status, IBV_WC_SUCCESS);
  ASSERT_EQ(r[0].wr_id, i) << "receive WQEs are taken in the order posted";
  ASSERT_TRUE(has_pattern(landed, 64, i));
}

// A receive queue the application keeps exactly full, as perftest's
// ib_send_bw does: each completion polled makes room for one WQE, and only
// one. Posting learns what was taken from polled completions (rq_pos) and
// must neither refuse the room a completion made nor overwrite a WQE no
// message took yet: every message lands in the buffer of the WQE posted
// for it, in order, round after round of the ring.
TEST_P(PerType, ReceiveRingKeptFullTakesEachWqeOnce) {
  const ibv_qp_type t = GetParam();
  Device dev;
  QpPair p(dev, t, 4);
  const uint32_t depth = cap_of(p.b).max_recv_wr;
  const uint32_t g = grh_of(t), slot = 64 + g;
  Buffer src(dev.pd, 64), dst(dev.pd, size_t{depth} * slot);
  for (uint32_t i = 0; i < depth; ++i) ASSERT_EQ(post_recv(p.b, i, dst.sge(size_t{i} * slot, slot)), 0);
  ibv_sge extra_sge = dst.sge(0, slot);
  for (uint32_t i = 0; i < 5 * depth + 3; ++i) {
    SCOPED_TRACE(i);
    ASSERT_NO_FATAL_FAILURE(send_and_expect_receive(p, src, i, dst.bytes.data() + size_t{i % depth} * slot + g));
    // The ring is full again after one post: a second one is refused.
    ASSERT_EQ(post_recv(p.b, i + depth, dst.sge(size_t{i % depth} * slot, slot)), 0);
    ibv_recv_wr* bad = nullptr;
    ASSERT_EQ(post_recv(p.b, 999, &extra_sge, 1, &bad), ENOMEM);
  }
}

// The same through an SRQ that two QPs (their own CQs) deliver to in turn.
TEST(Srq, KeptFullTakesEachWqeOnceFromTwoQps) {
  Device dev;
  ibv_srq* srq = create_srq(dev.pd, 4);
  ASSERT_NE(srq, nullptr);
  ibv_srq_attr got{};
  ASSERT_EQ(ibv_query_srq(srq, &got), 0);
  {
    const uint32_t depth = got.max_wr;
    QpPair p1(dev, IBV_QPT_RC, 8, srq), p2(dev, IBV_QPT_RC, 8, srq);
    QpPair* pairs[] = {&p1, &p2};
    Buffer src(dev.pd, 64), dst(dev.pd, size_t{depth} * 64);
    for (uint32_t i = 0; i < depth; ++i) ASSERT_EQ(post_srq_recv(srq, i, dst.sge(size_t{i} * 64, 64)), 0);
    for (uint32_t i = 0; i < 5 * depth + 1; ++i) {
      SCOPED_TRACE(i);
      const uint8_t* landed = dst.bytes.data() + size_t{i % depth} * 64;
      ASSERT_NO_FATAL_FAILURE(send_and_expect_receive(*pairs[i % 2], src, i, landed));
      ASSERT_EQ(post_srq_recv(srq, i + depth, dst.sge(size_t{i % depth} * 64, 64)), 0);
      ASSERT_EQ(post_srq_recv(srq, 999, dst.sge(0, 64)), ENOMEM);
    }
  }
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

// ================================================================ error completions (RC)

TEST(RcErrors, BadLkeyFlushesTheQp) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  Buffer src(dev.pd, 256), dst(dev.pd, 1024), own(dev.pd, 256);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(post_recv(p.b, 100 + i, dst.sge(i * 256, 256)), 0);
  ASSERT_EQ(post_recv(p.a, 50, own.sge(0, 128)), 0);
  ASSERT_EQ(post_recv(p.a, 51, own.sge(128, 128)), 0);
  ibv_sge bad_sg{src.addr(), 64, src.mr->lkey ^ 0x00abcd00u};
  ibv_sge good = src.sge(0, 64);
  ibv_send_wr w[3] = {make_wr(1, &bad_sg, 1), make_wr(2, &good, 1), make_wr(3, &good, 1)};
  w[0].next = &w[1];
  w[1].next = &w[2];
  ASSERT_EQ(post_send(p.a, w), 0);
  auto c = wait_wc(p.cq_a, 5, 1000);
  ASSERT_EQ(c.size(), 5u) << "expected 3 send and 2 receive completions";
  std::map<uint64_t, ibv_wc> by_id;
  for (auto& x : c) by_id[x.wr_id] = x;
  ASSERT_EQ(by_id.size(), 5u);
  EXPECT_EQ(by_id[1].status, IBV_WC_LOC_PROT_ERR) << ibv_wc_status_str(by_id[1].status);
  EXPECT_EQ(by_id[2].status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(by_id[2].status);
  EXPECT_EQ(by_id[3].status, IBV_WC_WR_FLUSH_ERR) << ibv_wc_status_str(by_id[3].status);
  EXPECT_EQ(by_id[50].status, IBV_WC_WR_FLUSH_ERR) << "a's posted receive was not flushed";
  EXPECT_EQ(by_id[51].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(by_id[50].qp_num, p.a->qp_num);
  // Send completions come in posting order.
  std::vector<uint64_t> send_order;
  for (auto& x : c)
    if (x.wr_id < 10) send_order.push_back(x.wr_id);
  EXPECT_EQ(send_order, (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(qp_state(p.a), IBV_QPS_ERR);
  // Posting in ERR is allowed; the WR is flushed.
  ibv_send_wr later = make_wr(4, &good, 1);
  EXPECT_EQ(post_send(p.a, &later), 0);
  auto l = wait_wc(p.cq_a, 1);
  ASSERT_EQ(l.size(), 1u);
  EXPECT_EQ(l[0].wr_id, 4u);
  EXPECT_EQ(l[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_TRUE(drain(p.cq_b, 10).empty()) << "b received something";
}

TEST(RcErrors, ReceiveBufferTooSmall) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  Buffer src(dev.pd, 256), dst(dev.pd, 256);
  ASSERT_EQ(post_recv(p.b, 7, dst.sge(0, 10)), 0);
  ibv_sge ss = src.sge(0, 100);
  ASSERT_EQ(send_a_to_b(p, 8, &ss, 1), 0);
  auto s = wait_wc(p.cq_a, 1, 1000), r = wait_wc(p.cq_b, 1, 1000);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_REM_INV_REQ_ERR) << ibv_wc_status_str(s[0].status);
  EXPECT_EQ(r[0].status, IBV_WC_LOC_LEN_ERR) << ibv_wc_status_str(r[0].status);
  EXPECT_EQ(r[0].wr_id, 7u);
  EXPECT_EQ(qp_state(p.a), IBV_QPS_ERR);
  EXPECT_EQ(qp_state(p.b), IBV_QPS_ERR);
}

TEST(RcErrors, RnrRetryZeroFailsAtOnce) {
  Device dev;
  ibv_cq* cq_a = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ibv_cq* cq_b = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ASSERT_TRUE(cq_a && cq_b);
  {
    RcOpts o;
    o.rnr_retry = 0;
    Link l(dev, IBV_QPT_RC, cq_a, cq_a, cq_b, cq_b, 16, nullptr, o);
    ASSERT_TRUE(l.ok);
    Buffer src(dev.pd, 64);
    ibv_sge ss = src.sge(0, 16);
    uint64_t t0 = mono_ns();
    ASSERT_EQ(l.send(1, &ss, 1), 0);
    auto s = wait_wc(cq_a, 1, 1000);
    ASSERT_EQ(s.size(), 1u) << "no completion within 1 s";
    EXPECT_EQ(s[0].status, IBV_WC_RNR_RETRY_EXC_ERR) << ibv_wc_status_str(s[0].status);
    EXPECT_LT(ms_since(t0), 1000.0);
    EXPECT_EQ(qp_state(l.a), IBV_QPS_ERR);
    EXPECT_EQ(qp_state(l.b), IBV_QPS_RTS) << "the responder is not affected";
  }
  ibv_destroy_cq(cq_a);
  ibv_destroy_cq(cq_b);
}

TEST(RcErrors, RnrRetryInfiniteWaitsForALateReceive) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);  // rnr_retry 7: retry forever
  Buffer src(dev.pd, 256), dst(dev.pd, 256);
  fill_pattern(src.bytes.data(), 256, 8);
  ibv_sge ss = src.sge(0, 200);
  ASSERT_EQ(send_a_to_b(p, 1, &ss, 1), 0);
  EXPECT_TRUE(drain(p.cq_a, 100).empty()) << "completed without a receive";
  ASSERT_EQ(post_recv(p.b, 2, dst.sge(0, 256)), 0);
  auto s = wait_wc(p.cq_a, 1, 1000), r = wait_wc(p.cq_b, 1, 1000);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(s[0].status);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(r[0].byte_len, 200u);
  EXPECT_TRUE(has_pattern(dst.bytes.data(), 200, 8));
}

// Inline data is the application's only until ibv_post_send returns. A
// SEND that found no receive waits in the send queue with its own copy:
// the bytes that arrive later are those of the post, and the WQEs posted
// behind it keep their order.
TEST(RcErrors, InlineSendWaitingForAReceiveKeepsItsBytes) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);  // rnr_retry 7: retry forever
  Buffer dst(dev.pd, 256);
  uint8_t stack_src[48];
  fill_pattern(stack_src, sizeof stack_src, 31);
  ibv_sge ss{reinterpret_cast<uint64_t>(stack_src), sizeof stack_src, 0};
  ASSERT_EQ(send_a_to_b(p, 1, &ss, 1, IBV_SEND_SIGNALED | IBV_SEND_INLINE), 0);
  fill_pattern(stack_src, sizeof stack_src, 32);
  ASSERT_EQ(send_a_to_b(p, 2, &ss, 1, IBV_SEND_SIGNALED | IBV_SEND_INLINE), 0);
  std::memset(stack_src, 0xee, sizeof stack_src);
  EXPECT_TRUE(drain(p.cq_a, 50).empty()) << "completed without a receive";
  ASSERT_EQ(post_recv(p.b, 10, dst.sge(0, 128)), 0);
  ASSERT_EQ(post_recv(p.b, 11, dst.sge(128, 128)), 0);
  auto s = wait_wc(p.cq_a, 2, 1000), r = wait_wc(p.cq_b, 2, 1000);
  ASSERT_EQ(s.size(), 2u);
  ASSERT_EQ(r.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << ibv_wc_status_str(s[i].status);
    EXPECT_EQ(s[i].wr_id, uint64_t(1 + i));
    EXPECT_EQ(r[i].wr_id, uint64_t(10 + i));
    EXPECT_EQ(r[i].byte_len, sizeof stack_src);
  }
  EXPECT_TRUE(has_pattern(dst.bytes.data(), sizeof stack_src, 31));
  EXPECT_TRUE(has_pattern(dst.bytes.data() + 128, sizeof stack_src, 32));
}

TEST(RcErrors, NonexistentDestinationExceedsRetries) {
  Device dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  {
    // A QPN that existed and is gone.
    ibv_qp* ghost = create_qp(dev.pd, IBV_QPT_RC, cq, cq);
    ASSERT_NE(ghost, nullptr);
    uint32_t dead_qpn = ghost->qp_num;
    ASSERT_EQ(ibv_destroy_qp(ghost), 0);
    ibv_qp* a = create_qp(dev.pd, IBV_QPT_RC, cq, cq);
    ASSERT_NE(a, nullptr);
    RcOpts o;
    o.timeout = 1;  // 8 us
    o.retry_cnt = 1;
    ASSERT_EQ(connect_with(a, dead_qpn, o), 0);
    Buffer src(dev.pd, 64);
    ibv_sge ss = src.sge(0, 16);
    ibv_send_wr wr = make_wr(1, &ss, 1);
    uint64_t t0 = mono_ns();
    ASSERT_EQ(post_send(a, &wr), 0);
    auto s = wait_wc(cq, 1, 2000);
    double ms = ms_since(t0);
    ASSERT_EQ(s.size(), 1u) << "no completion within 2 s";
    EXPECT_EQ(s[0].status, IBV_WC_RETRY_EXC_ERR) << ibv_wc_status_str(s[0].status);
    EXPECT_LT(ms, 1000.0);
    EXPECT_EQ(qp_state(a), IBV_QPS_ERR);
    ibv_destroy_qp(a);
  }
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

TEST_P(PerType, ModifyToErrFlushesReceives) {
  Device dev;
  QpPair p(dev, GetParam());
  Buffer dst(dev.pd, 1024);
  for (int i = 0; i < 3; ++i) ASSERT_EQ(post_recv(p.b, 40 + i, dst.sge(i * 256, 256)), 0);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(p.b, &a, IBV_QP_STATE), 0);
  auto w = wait_wc(p.cq_b, 3, 1000);
  ASSERT_EQ(w.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(w[i].wr_id, uint64_t(40 + i));
    EXPECT_EQ(w[i].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(w[i].qp_num, p.b->qp_num);
  }
  EXPECT_EQ(qp_state(p.b), IBV_QPS_ERR);
}

// ================================================================ SRQ

TEST(Srq, CreateWritesBackAndQuery) {
  Device dev;
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(dev.ctx, &da), 0);
  ibv_srq_init_attr ia{};
  ia.attr.max_wr = 100;
  ia.attr.max_sge = 3;
  int marker;
  ia.srq_context = &marker;
  ibv_srq* srq = ibv_create_srq(dev.pd, &ia);
  ASSERT_NE(srq, nullptr) << strerror(errno);
  EXPECT_GE(ia.attr.max_wr, 100u);
  EXPECT_GE(ia.attr.max_sge, 3u);
  EXPECT_EQ(srq->srq_context, &marker);
  ibv_srq_attr q{};
  ASSERT_EQ(ibv_query_srq(srq, &q), 0);
  EXPECT_EQ(q.max_wr, ia.attr.max_wr);
  EXPECT_GE(q.max_sge, 3u);
  EXPECT_EQ(q.srq_limit, 0u);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);

  struct Bad {
    const char* name;
    uint32_t max_wr, max_sge;
  } bad[] = {{"max_wr_0", 0, 1},
             {"max_wr_too_large", uint32_t(da.max_srq_wr) + 1, 1},
             {"max_sge_too_large", 16, uint32_t(da.max_srq_sge) + 1}};
  for (const Bad& b : bad) {
    SCOPED_TRACE(b.name);
    ibv_srq_init_attr x{};
    x.attr.max_wr = b.max_wr;
    x.attr.max_sge = b.max_sge;
    errno = 0;
    ibv_srq* s = ibv_create_srq(dev.pd, &x);
    EXPECT_EQ(s, nullptr);
    EXPECT_EQ(errno, EINVAL);
    if (s) ibv_destroy_srq(s);
  }
}

TEST(Srq, SharedBySeveralQps) {
  Device dev;
  ibv_srq* srq = create_srq(dev.pd, 16);
  ASSERT_NE(srq, nullptr);
  {
    QpPair p1(dev, IBV_QPT_RC, 16, srq), p2(dev, IBV_QPT_RC, 16, srq), p3(dev, IBV_QPT_UD, 16, srq);
    QpPair* pairs[] = {&p1, &p2, &p3};
    Buffer src(dev.pd, 3 * 64), dst(dev.pd, 3 * 256);
    for (int i = 0; i < 3; ++i) {
      fill_pattern(src.bytes.data() + i * 64, 64, 20 + i);
      ASSERT_EQ(post_srq_recv(srq, 10 + i, dst.sge(i * 256, 256)), 0);
    }
    for (int i = 0; i < 3; ++i) {
      SCOPED_TRACE(i);
      QpPair& p = *pairs[i];
      ibv_sge ss = src.sge(i * 64, 64);
      ASSERT_EQ(send_a_to_b(p, i, &ss, 1), 0);
      auto r = wait_wc(p.cq_b, 1);
      ASSERT_EQ(r.size(), 1u);
      EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
      EXPECT_EQ(r[0].wr_id, uint64_t(10 + i)) << "SRQ receives are consumed in order";
      EXPECT_EQ(r[0].qp_num, p.b->qp_num);
      uint32_t g = grh_of(p.type);
      EXPECT_EQ(r[0].byte_len, 64u + g);
      EXPECT_TRUE(has_pattern(dst.bytes.data() + i * 256 + g, 64, 20 + i));
    }
    // A QP with an SRQ has no receive queue of its own.
    ibv_recv_wr* bad = nullptr;
    ibv_sge one = dst.sge(0, 64);
    EXPECT_NE(post_recv(p1.b, 99, &one, 1, &bad), 0) << "post_recv on a QP that uses an SRQ";
  }
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST(Srq, LimitEventFiresOnceBelowTheLimit) {
  Device dev;
  int fl = fcntl(dev.ctx->async_fd, F_GETFL);
  ASSERT_EQ(fcntl(dev.ctx->async_fd, F_SETFL, fl | O_NONBLOCK), 0);
  ibv_srq* srq = create_srq(dev.pd, 16);
  ASSERT_NE(srq, nullptr);
  {
    QpPair p(dev, IBV_QPT_RC, 16, srq);
    Buffer src(dev.pd, 64), dst(dev.pd, 8 * 64);
    for (int i = 0; i < 8; ++i) ASSERT_EQ(post_srq_recv(srq, i, dst.sge(i * 64, 64)), 0);
    ibv_srq_attr la{};
    la.srq_limit = 4;
    ASSERT_EQ(ibv_modify_srq(srq, &la, IBV_SRQ_LIMIT), 0);
    ibv_srq_attr q{};
    ASSERT_EQ(ibv_query_srq(srq, &q), 0);
    EXPECT_EQ(q.srq_limit, 4u);
    auto one = [&](int id) {
      ibv_sge ss = src.sge(0, 8);
      ASSERT_EQ(send_a_to_b(p, id, &ss, 1), 0);
      ASSERT_EQ(wait_wc(p.cq_b, 1).size(), 1u);
    };
    for (int i = 0; i < 4; ++i) one(i);  // 8 -> 4 posted: not below the limit yet
    EXPECT_FALSE(readable(dev.ctx->async_fd, 20)) << "event before the SRQ dropped below its limit";
    one(4);  // 3 left < 4
    ASSERT_TRUE(readable(dev.ctx->async_fd, 1000)) << "no IBV_EVENT_SRQ_LIMIT_REACHED";
    ibv_async_event ev{};
    ASSERT_EQ(ibv_get_async_event(dev.ctx, &ev), 0);
    EXPECT_EQ(ev.event_type, IBV_EVENT_SRQ_LIMIT_REACHED) << ibv_event_type_str(ev.event_type);
    EXPECT_EQ(ev.element.srq, srq);
    ibv_ack_async_event(&ev);
    // Its only event was returned: the fd must not stay readable (a poll()
    // loop would call the blocking ibv_get_async_event for nothing).
    EXPECT_FALSE(readable(dev.ctx->async_fd, 0)) << "async fd still readable after its only event was returned";
    errno = 0;
    EXPECT_EQ(ibv_get_async_event(dev.ctx, &ev), -1) << "unexpected second event "
                                                      << ibv_event_type_str(ev.event_type);
    EXPECT_EQ(errno, EAGAIN);
    ASSERT_EQ(ibv_query_srq(srq, &q), 0);
    EXPECT_EQ(q.srq_limit, 0u) << "the limit disarms when it fires";
    one(5);
    one(6);
    errno = 0;
    ibv_async_event ev2{};
    int rc = ibv_get_async_event(dev.ctx, &ev2);
    EXPECT_EQ(rc, -1) << "the limit fired twice: " << ibv_event_type_str(ev2.event_type);
    if (rc == 0) ibv_ack_async_event(&ev2);
  }
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST(Srq, DestroyInUseIsEbusy) {
  Device dev;
  ibv_srq* srq = create_srq(dev.pd, 16);
  ASSERT_NE(srq, nullptr);
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* qp = create_qp(dev.pd, IBV_QPT_RC, cq, cq, 16, srq);
  ASSERT_NE(qp, nullptr);
  int rc = ibv_destroy_srq(srq);
  EXPECT_EQ(rc, EBUSY);
  EXPECT_EQ(ibv_destroy_qp(qp), 0);
  if (rc != 0) {
    EXPECT_EQ(ibv_destroy_srq(srq), 0);
  }
  EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

// ================================================================ RDMA (RC)

TEST(Rdma, Write) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  Buffer src(dev.pd, 4096), dst(dev.pd, 4096);
  fill_pattern(src.bytes.data(), 4096, 30);
  ibv_sge ss = src.sge(0, 1000);
  ibv_send_wr wr = make_wr(1, &ss, 1, IBV_WR_RDMA_WRITE);
  wr.wr.rdma.remote_addr = dst.addr() + 100;
  wr.wr.rdma.rkey = dst.mr->rkey;
  ASSERT_EQ(post_send(p.a, &wr), 0);
  auto s = wait_wc(p.cq_a, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << status_str(s, 0);
  EXPECT_EQ(s[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(std::memcmp(dst.bytes.data() + 100, src.bytes.data(), 1000), 0);
  EXPECT_EQ(dst.bytes[99], 0);
  EXPECT_EQ(dst.bytes[1100], 0);
  EXPECT_TRUE(drain(p.cq_b, 10).empty()) << "RDMA WRITE consumed/completed a receive";
}

TEST(Rdma, WriteWithImmediate) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  Buffer src(dev.pd, 4096), dst(dev.pd, 4096);
  fill_pattern(src.bytes.data(), 4096, 31);
  ASSERT_EQ(post_recv(p.b, 77, nullptr, 0), 0);
  ibv_sge ss = src.sge(0, 500);
  ibv_send_wr wr = make_wr(1, &ss, 1, IBV_WR_RDMA_WRITE_WITH_IMM);
  wr.imm_data = htonl(0xfeed);
  wr.wr.rdma.remote_addr = dst.addr() + 2000;
  wr.wr.rdma.rkey = dst.mr->rkey;
  ASSERT_EQ(post_send(p.a, &wr), 0);
  auto s = wait_wc(p.cq_a, 1), r = wait_wc(p.cq_b, 1);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(s[0].opcode, IBV_WC_RDMA_WRITE);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(r[0].wr_id, 77u);
  EXPECT_EQ(r[0].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_TRUE(r[0].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(r[0].imm_data), 0xfeedu);
  EXPECT_EQ(r[0].byte_len, 500u);
  EXPECT_EQ(std::memcmp(dst.bytes.data() + 2000, src.bytes.data(), 500), 0);
}

TEST(Rdma, Read) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  Buffer local(dev.pd, 4096), remote(dev.pd, 8192);
  fill_pattern(remote.bytes.data(), 8192, 32);
  ibv_sge ls = local.sge(10, 3000);
  ibv_send_wr wr = make_wr(1, &ls, 1, IBV_WR_RDMA_READ);
  wr.wr.rdma.remote_addr = remote.addr() + 4000;
  wr.wr.rdma.rkey = remote.mr->rkey;
  ASSERT_EQ(post_send(p.a, &wr), 0);
  auto s = wait_wc(p.cq_a, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << status_str(s, 0);
  EXPECT_EQ(s[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(s[0].byte_len, 3000u);
  EXPECT_EQ(std::memcmp(local.bytes.data() + 10, remote.bytes.data() + 4000, 3000), 0);
  EXPECT_EQ(local.bytes[9], 0);
  EXPECT_EQ(local.bytes[3010], 0);
}

// The READ's destination must allow local writes: without LOCAL_WRITE its
// lkey is refused before anything is read (IBV_WC_LOC_PROT_ERR), the
// buffer is left alone, and the RC QP goes to the error state.
TEST(Rdma, ReadIntoMemoryWithoutLocalWriteIsProtectionError) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  Buffer local(dev.pd, 4096, 0), remote(dev.pd, 4096);
  fill_pattern(remote.bytes.data(), 4096, 33);
  ibv_sge ls = local.sge(0, 64);
  ibv_send_wr wr = make_wr(1, &ls, 1, IBV_WR_RDMA_READ);
  wr.wr.rdma.remote_addr = remote.addr();
  wr.wr.rdma.rkey = remote.mr->rkey;
  ASSERT_EQ(post_send(p.a, &wr), 0);
  auto s = wait_wc(p.cq_a, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_LOC_PROT_ERR) << status_str(s, 0);
  EXPECT_EQ(local.bytes[0], 0);
  EXPECT_EQ(qp_state(p.a), IBV_QPS_ERR);
}

TEST(Rdma, RemoteAccessErrors) {
  enum Fault { kBadRkey, kOutOfBounds, kNoRight };
  struct Case {
    const char* name;
    ibv_wr_opcode op;
    Fault fault;
  } cases[] = {
      {"write_bad_rkey", IBV_WR_RDMA_WRITE, kBadRkey},
      {"write_imm_bad_rkey", IBV_WR_RDMA_WRITE_WITH_IMM, kBadRkey},
      {"read_bad_rkey", IBV_WR_RDMA_READ, kBadRkey},
      {"write_out_of_bounds", IBV_WR_RDMA_WRITE, kOutOfBounds},
      {"read_out_of_bounds", IBV_WR_RDMA_READ, kOutOfBounds},
      {"write_without_remote_write", IBV_WR_RDMA_WRITE, kNoRight},
      {"read_without_remote_read", IBV_WR_RDMA_READ, kNoRight},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Device dev;
    QpPair p(dev, IBV_QPT_RC);
    Buffer local(dev.pd, 4096);
    int access = c.fault != kNoRight                ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                                                           IBV_ACCESS_REMOTE_READ
                 : c.op == IBV_WR_RDMA_READ ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE
                                            : IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
    Buffer remote(dev.pd, 4096, access);
    fill_pattern(remote.bytes.data(), 4096, 33);
    if (c.op == IBV_WR_RDMA_WRITE_WITH_IMM) {
      ASSERT_EQ(post_recv(p.b, 1, nullptr, 0), 0);
    }
    ibv_sge ls = local.sge(0, 256);
    ibv_send_wr wr = make_wr(1, &ls, 1, c.op);
    wr.wr.rdma.remote_addr = remote.addr() + (c.fault == kOutOfBounds ? 4096 - 100 : 0);
    wr.wr.rdma.rkey = c.fault == kBadRkey ? remote.mr->rkey ^ 0x00770000u : remote.mr->rkey;
    ASSERT_EQ(post_send(p.a, &wr), 0);
    auto s = wait_wc(p.cq_a, 1, 1000);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_REM_ACCESS_ERR) << ibv_wc_status_str(s[0].status);
    EXPECT_EQ(qp_state(p.a), IBV_QPS_ERR);
    EXPECT_TRUE(has_pattern(remote.bytes.data(), 4096, 33)) << "remote memory changed";
    if (c.op == IBV_WR_RDMA_READ) {
      EXPECT_TRUE(std::all_of(local.bytes.begin(), local.bytes.end(), [](uint8_t b) { return b == 0; }));
    }
  }
}

TEST(Rdma, UcWriteWithBadRkeyIsSilentlyDropped) {
  Device dev;
  QpPair p(dev, IBV_QPT_UC);
  Buffer local(dev.pd, 256), remote(dev.pd, 256);
  fill_pattern(local.bytes.data(), 256, 34);
  ibv_sge ls = local.sge(0, 100);
  ibv_send_wr wr = make_wr(1, &ls, 1, IBV_WR_RDMA_WRITE);
  wr.wr.rdma.remote_addr = remote.addr();
  wr.wr.rdma.rkey = remote.mr->rkey ^ 0x00770000u;
  ASSERT_EQ(post_send(p.a, &wr), 0);
  auto s = wait_wc(p.cq_a, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << "UC has no acknowledgements";
  EXPECT_TRUE(std::all_of(remote.bytes.begin(), remote.bytes.end(), [](uint8_t b) { return b == 0; }));
}

// ================================================================ ibv_qp_ex

ibv_qp* create_ex_qp(Device& dev, ibv_qp_type t, ibv_cq* cq, uint64_t ops) {
  ibv_qp_init_attr_ex ia{};
  ia.qp_type = t;
  ia.send_cq = ia.recv_cq = cq;
  ia.cap.max_send_wr = 16;
  ia.cap.max_recv_wr = 16;
  ia.cap.max_send_sge = 4;
  ia.cap.max_recv_sge = 4;
  ia.cap.max_inline_data = 64;
  ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  ia.pd = dev.pd;
  ia.send_ops_flags = ops;
  return ibv_create_qp_ex(dev.ctx, &ia);
}

struct ExPair {
  Device& dev;
  ibv_qp_type type;
  ibv_cq* cq_a = nullptr;
  ibv_cq* cq_b = nullptr;
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
  ibv_qp_ex* x = nullptr;
  ibv_ah* ah = nullptr;
  bool ok = false;
  ExPair(Device& d, ibv_qp_type t, uint64_t ops) : dev(d), type(t) {
    cq_a = ibv_create_cq(d.ctx, 64, nullptr, nullptr, 0);
    cq_b = ibv_create_cq(d.ctx, 64, nullptr, nullptr, 0);
    if (!cq_a || !cq_b) return;
    a = create_ex_qp(d, t, cq_a, ops);
    b = create_qp(d.pd, t, cq_b, cq_b, 16);
    if (!a || !b) return;
    x = ibv_qp_to_qp_ex(a);
    if (!x || connect_qp(a, b->qp_num) || connect_qp(b, a->qp_num)) return;
    if (t == IBV_QPT_UD && !(ah = make_ah(d.pd, d.gid_index))) return;
    ok = true;
  }
  ~ExPair() {
    if (ah) ibv_destroy_ah(ah);
    if (a) ibv_destroy_qp(a);
    if (b) ibv_destroy_qp(b);
    if (cq_a) ibv_destroy_cq(cq_a);
    if (cq_b) ibv_destroy_cq(cq_b);
  }
  void addr() {
    if (type == IBV_QPT_UD) ibv_wr_set_ud_addr(x, ah, b->qp_num, kQkey);
  }
};

class QpEx : public ::testing::TestWithParam<ibv_qp_type> {};

TEST_P(QpEx, EverySetterInOneBatch) {
  const ibv_qp_type t = GetParam();
  Device dev;
  ExPair e(dev, t, IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM);
  ASSERT_TRUE(e.ok) << strerror(errno);
  const uint32_t g = grh_of(t);
  Buffer src(dev.pd, 1024), dst(dev.pd, 4 * 256);
  fill_pattern(src.bytes.data(), 1024, 40);
  for (int i = 0; i < 4; ++i) ASSERT_EQ(post_recv(e.b, 100 + i, dst.sge(i * 256, 256)), 0);
  uint8_t inl1[20], inl2a[7], inl2b[9];
  fill_pattern(inl1, sizeof inl1, 41);
  fill_pattern(inl2a, sizeof inl2a, 42);
  fill_pattern(inl2b, sizeof inl2b, 43);

  ibv_wr_start(e.x);
  e.x->wr_id = 1;
  e.x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(e.x);
  e.addr();
  ibv_wr_set_sge(e.x, src.mr->lkey, src.addr(), 50);

  e.x->wr_id = 2;
  e.x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send_imm(e.x, htonl(0xbeef));
  e.addr();
  ibv_sge list[2] = {src.sge(100, 30), src.sge(300, 40)};
  ibv_wr_set_sge_list(e.x, 2, list);

  e.x->wr_id = 3;
  e.x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  ibv_wr_send(e.x);
  e.addr();
  ibv_wr_set_inline_data(e.x, inl1, sizeof inl1);

  e.x->wr_id = 4;
  e.x->wr_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
  ibv_wr_send(e.x);
  e.addr();
  ibv_data_buf bufs[2] = {{inl2a, sizeof inl2a}, {inl2b, sizeof inl2b}};
  ibv_wr_set_inline_data_list(e.x, 2, bufs);
  ASSERT_EQ(ibv_wr_complete(e.x), 0);
  // Inline data was copied: changing it now changes nothing.
  std::memset(inl1, 0, sizeof inl1);

  auto s = wait_wc(e.cq_a, 4), r = wait_wc(e.cq_b, 4);
  ASSERT_EQ(s.size(), 4u);
  ASSERT_EQ(r.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(s[i].wr_id, uint64_t(i + 1));
    EXPECT_EQ(s[i].status, IBV_WC_SUCCESS) << status_str(s, i);
    EXPECT_EQ(r[i].wr_id, uint64_t(100 + i));
    EXPECT_EQ(r[i].status, IBV_WC_SUCCESS) << status_str(r, i);
  }
  const uint8_t* d = dst.bytes.data();
  EXPECT_EQ(r[0].byte_len, 50u + g);
  EXPECT_EQ(std::memcmp(d + g, src.bytes.data(), 50), 0);
  EXPECT_EQ(r[1].byte_len, 70u + g);
  EXPECT_TRUE(r[1].wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(r[1].imm_data), 0xbeefu);
  EXPECT_EQ(std::memcmp(d + 256 + g, src.bytes.data() + 100, 30), 0);
  EXPECT_EQ(std::memcmp(d + 256 + g + 30, src.bytes.data() + 300, 40), 0);
  EXPECT_EQ(r[2].byte_len, 20u + g);
  EXPECT_TRUE(has_pattern(d + 512 + g, 20, 41));
  EXPECT_EQ(r[3].byte_len, 16u + g);
  EXPECT_TRUE(has_pattern(d + 768 + g, 7, 42));
  EXPECT_TRUE(has_pattern(d + 768 + g + 7, 9, 43));
}

TEST_P(QpEx, AbortedWorkRequestsNeverExecute) {
  const ibv_qp_type t = GetParam();
  Device dev;
  ExPair e(dev, t, IBV_QP_EX_WITH_SEND);
  ASSERT_TRUE(e.ok);
  const uint32_t g = grh_of(t);
  Buffer src(dev.pd, 256), dst(dev.pd, 256);
  fill_pattern(src.bytes.data(), 256, 44);
  ASSERT_EQ(post_recv(e.b, 100, dst.sge(0, 256)), 0);
  ibv_wr_start(e.x);
  for (int i = 0; i < 3; ++i) {
    e.x->wr_id = 1 + i;
    e.x->wr_flags = IBV_SEND_SIGNALED;
    ibv_wr_send(e.x);
    e.addr();
    ibv_wr_set_sge(e.x, src.mr->lkey, src.addr(), 64);
  }
  ibv_wr_abort(e.x);
  EXPECT_TRUE(drain(e.cq_a, 20).empty()) << "an aborted WR completed";
  EXPECT_TRUE(drain(e.cq_b, 0).empty()) << "an aborted WR was delivered";
  // The next batch works and is the first thing the receiver sees.
  ibv_wr_start(e.x);
  e.x->wr_id = 9;
  e.x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(e.x);
  e.addr();
  ibv_wr_set_sge(e.x, src.mr->lkey, src.addr() + 100, 30);
  ASSERT_EQ(ibv_wr_complete(e.x), 0);
  auto s = wait_wc(e.cq_a, 1), r = wait_wc(e.cq_b, 1);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 9u);
  EXPECT_EQ(r[0].wr_id, 100u);
  EXPECT_EQ(r[0].byte_len, 30u + g);
  EXPECT_EQ(std::memcmp(dst.bytes.data() + g, src.bytes.data() + 100, 30), 0);
  EXPECT_TRUE(drain(e.cq_a, 10).empty());
}

TEST_P(QpEx, OperationNotEnabledMakesCompleteFail) {
  const ibv_qp_type t = GetParam();
  Device dev;
  ExPair e(dev, t, IBV_QP_EX_WITH_SEND);  // no SEND_WITH_IMM
  ASSERT_TRUE(e.ok);
  Buffer src(dev.pd, 256), dst(dev.pd, 256);
  ASSERT_EQ(post_recv(e.b, 100, dst.sge(0, 256)), 0);
  ASSERT_NE(e.x->wr_send_imm, nullptr);
  ibv_wr_start(e.x);
  e.x->wr_id = 1;
  e.x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send_imm(e.x, htonl(1));
  e.addr();
  ibv_wr_set_sge(e.x, src.mr->lkey, src.addr(), 16);
  EXPECT_NE(ibv_wr_complete(e.x), 0);
  EXPECT_TRUE(drain(e.cq_a, 20).empty());
  EXPECT_TRUE(drain(e.cq_b, 0).empty());
  // The QP is still usable with what it enabled.
  ibv_wr_start(e.x);
  e.x->wr_id = 2;
  e.x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(e.x);
  e.addr();
  ibv_wr_set_sge(e.x, src.mr->lkey, src.addr(), 16);
  EXPECT_EQ(ibv_wr_complete(e.x), 0);
  auto s = wait_wc(e.cq_a, 1);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].wr_id, 2u);
  EXPECT_EQ(wait_wc(e.cq_b, 1).size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(Qpt, QpEx, ::testing::Values(IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_UD), type_name);

}  // namespace
