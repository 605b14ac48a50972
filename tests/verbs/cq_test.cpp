// Completion queues: creation limits, the extended CQ (ibv_cq_ex) polling
// API with timestamps, resizing, destroy rules, completion channels and
// solicited events, and CQ overrun reported as an async event.
#include <fcntl.h>
#include <gtest/gtest.h>

#include <memory>
#include <unistd.h>

#include <arpa/inet.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>
#include <thread>
#include <atomic>

#include "verbs_fixture.h"
#include "verbs_test_util.h"

using namespace svtest;
using namespace svtest::util;

namespace {

int max_cqe(ibv_context* ctx) {
  ibv_device_attr a{};
  if (ibv_query_device(ctx, &a)) return -1;
  return a.max_cqe;
}

// ---------------------------------------------------------------- creation

TEST(CqCreate, CqeIsRoundedUp) {
  Device dev;
  for (int want : {1, 2, 3, 7, 15, 16, 17, 100, 1000, 4096, 65537}) {
    SCOPED_TRACE(want);
    ibv_cq* cq = ibv_create_cq(dev.ctx, want, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr) << strerror(errno);
    EXPECT_GE(cq->cqe, want);
    EXPECT_EQ(cq->context, dev.ctx);
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
  }
}

TEST(CqCreate, InvalidArgumentsAreEinval) {
  Device dev;
  int mx = max_cqe(dev.ctx);
  ASSERT_GT(mx, 0);
  struct Case {
    const char* name;
    int cqe;
    int comp_vector;
  } cases[] = {
      {"cqe_0", 0, 0},
      {"cqe_negative", -1, 0},
      {"cqe_above_max_cqe", mx == INT_MAX ? INT_MAX : mx + 1, 0},
      {"comp_vector_negative", 16, -1},
      {"comp_vector_too_large", 16, dev.ctx->num_comp_vectors},
      {"comp_vector_far_too_large", 16, dev.ctx->num_comp_vectors + 100},
  };
  EXPECT_GE(dev.ctx->num_comp_vectors, 1);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    errno = 0;
    ibv_cq* cq = ibv_create_cq(dev.ctx, c.cqe, nullptr, nullptr, c.comp_vector);
    EXPECT_EQ(cq, nullptr);
    EXPECT_EQ(errno, EINVAL) << strerror(errno);
    if (cq) ibv_destroy_cq(cq);
  }
  // The largest valid values work.
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, dev.ctx->num_comp_vectors - 1);
  EXPECT_NE(cq, nullptr);
  if (cq) ibv_destroy_cq(cq);
}

// ---------------------------------------------------------------- ibv_cq_ex

TEST(CqEx, UnknownCompMaskIsEinval) {
  Device dev;
  ibv_cq_init_attr_ex ia{};
  ia.cqe = 16;
  ia.wc_flags = IBV_WC_STANDARD_FLAGS;
  ia.comp_mask = 1u << 30;
  errno = 0;
  ibv_cq_ex* cq = ibv_create_cq_ex(dev.ctx, &ia);
  EXPECT_EQ(cq, nullptr);
  EXPECT_EQ(errno, EINVAL) << strerror(errno);
  if (cq) ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
}

TEST(CqEx, StartPollOnEmptyCqIsEnoent) {
  Device dev;
  ibv_cq_init_attr_ex ia{};
  ia.cqe = 16;
  ia.wc_flags = IBV_WC_STANDARD_FLAGS;
  ibv_cq_ex* cq = ibv_create_cq_ex(dev.ctx, &ia);
  ASSERT_NE(cq, nullptr);
  ibv_poll_cq_attr pa{};
  EXPECT_EQ(ibv_start_poll(cq, &pa), ENOENT);
  // An unknown poll attribute bit is refused.
  pa.comp_mask = 1;
  int rc = ibv_start_poll(cq, &pa);
  EXPECT_EQ(rc, EINVAL);
  if (rc == 0) ibv_end_poll(cq);
  EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(cq)), 0);
}

struct ExEntry {
  uint64_t wr_id;
  ibv_wc_status status;
  ibv_wc_opcode opcode;
  uint32_t byte_len, qp_num, src_qp, imm;
  unsigned flags;
  uint64_t ts, wallclock;
};

std::vector<ExEntry> poll_ex(ibv_cq_ex* cq, bool with_src_qp) {
  std::vector<ExEntry> out;
  ibv_poll_cq_attr pa{};
  int rc = ibv_start_poll(cq, &pa);
  if (rc == ENOENT) return out;
  EXPECT_EQ(rc, 0);
  if (rc) return out;
  do {
    ExEntry e{};
    e.wr_id = cq->wr_id;
    e.status = cq->status;
    e.opcode = ibv_wc_read_opcode(cq);
    e.byte_len = ibv_wc_read_byte_len(cq);
    e.qp_num = ibv_wc_read_qp_num(cq);
    if (with_src_qp) e.src_qp = ibv_wc_read_src_qp(cq);
    e.flags = ibv_wc_read_wc_flags(cq);
    if (e.flags & IBV_WC_WITH_IMM) e.imm = ntohl(ibv_wc_read_imm_data(cq));
    e.ts = ibv_wc_read_completion_ts(cq);
    e.wallclock = ibv_wc_read_completion_wallclock_ns(cq);
    out.push_back(e);
  } while (ibv_next_poll(cq) == 0);
  ibv_end_poll(cq);
  return out;
}

TEST(CqEx, ExtendedPollReadsEveryField) {
  Device dev;
  ibv_device_attr_ex dx{};
  ASSERT_EQ(ibv_query_device_ex(dev.ctx, nullptr, &dx), 0);
  ASSERT_NE(dx.hca_core_clock, 0u);

  ibv_cq_init_attr_ex ia{};
  ia.cqe = 32;
  ia.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
                IBV_WC_EX_WITH_COMPLETION_TIMESTAMP | IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK;
  ibv_cq_ex* scx = ibv_create_cq_ex(dev.ctx, &ia);
  ibv_cq_ex* rcx = ibv_create_cq_ex(dev.ctx, &ia);
  ASSERT_NE(scx, nullptr) << strerror(errno);
  ASSERT_NE(rcx, nullptr) << strerror(errno);
  ibv_cq* scq = ibv_cq_ex_to_cq(scx);
  ibv_cq* rcq = ibv_cq_ex_to_cq(rcx);
  {
    Link l(dev, IBV_QPT_UD, scq, scq, scq, rcq);
    ASSERT_TRUE(l.ok);
    Buffer src(dev.pd, 4096), dst(dev.pd, 8 * 512);
    fill_pattern(src.bytes.data(), 4096, 1);
    constexpr int kMsgs = 4;
    for (int i = 0; i < kMsgs; ++i) ASSERT_EQ(post_recv(l.b, 100 + i, dst.sge(i * 512, 512)), 0);
    uint64_t real_before = real_ns();
    for (int i = 0; i < kMsgs; ++i) {
      ibv_sge s = src.sge(0, 10 + i);
      ASSERT_EQ(l.send(i, &s, 1, IBV_SEND_SIGNALED, i % 2 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, htonl(0xabc0 + i)), 0);
      sleep_ms(i == kMsgs - 2 ? 20 : 1);  // 20 ms between the last two: checks the clock's unit
    }
    auto sends = poll_ex(scx, false);
    // Send completions may have been consumed by a first poll: wait a bit for stragglers.
    for (int t = 0; t < 100 && sends.size() < kMsgs; ++t) {
      sleep_ms(1);
      auto more = poll_ex(scx, false);
      sends.insert(sends.end(), more.begin(), more.end());
    }
    auto recvs = poll_ex(rcx, true);
    for (int t = 0; t < 100 && recvs.size() < kMsgs; ++t) {
      sleep_ms(1);
      auto more = poll_ex(rcx, true);
      recvs.insert(recvs.end(), more.begin(), more.end());
    }
    uint64_t real_after = real_ns();
    ASSERT_EQ(sends.size(), size_t(kMsgs));
    ASSERT_EQ(recvs.size(), size_t(kMsgs));
    for (int i = 0; i < kMsgs; ++i) {
      SCOPED_TRACE(i);
      const ExEntry& s = sends[i];
      EXPECT_EQ(s.wr_id, uint64_t(i));
      EXPECT_EQ(s.status, IBV_WC_SUCCESS);
      EXPECT_EQ(s.opcode, IBV_WC_SEND);
      EXPECT_EQ(s.qp_num, l.a->qp_num);
      const ExEntry& r = recvs[i];
      EXPECT_EQ(r.wr_id, uint64_t(100 + i));
      EXPECT_EQ(r.status, IBV_WC_SUCCESS);
      EXPECT_EQ(r.opcode, IBV_WC_RECV);
      EXPECT_EQ(r.byte_len, 10u + i + kGrh);
      EXPECT_EQ(r.qp_num, l.b->qp_num);
      EXPECT_EQ(r.src_qp, l.a->qp_num);
      EXPECT_TRUE(r.flags & IBV_WC_GRH);
      if (i % 2) {
        EXPECT_TRUE(r.flags & IBV_WC_WITH_IMM);
        EXPECT_EQ(r.imm, 0xabc0u + i);
      } else {
        EXPECT_FALSE(r.flags & IBV_WC_WITH_IMM);
      }
      // Wallclock: between the first post and the last poll (2 ms slack for
      // the conversion from the device clock).
      EXPECT_GE(r.wallclock + 2'000'000, real_before);
      EXPECT_LE(r.wallclock, real_after + 2'000'000);
      EXPECT_GE(s.wallclock + 2'000'000, real_before);
      EXPECT_LE(s.wallclock, real_after + 2'000'000);
      if (i > 0) {
        EXPECT_GT(r.ts, recvs[i - 1].ts) << "completion timestamps must increase";
        EXPECT_GT(s.ts, sends[i - 1].ts);
        EXPECT_GT(r.wallclock, recvs[i - 1].wallclock);
      }
    }
    // hca_core_clock is in kHz: ticks / kHz = ms. The last two messages were
    // 20 ms apart.
    double ms = double(recvs[kMsgs - 1].ts - recvs[kMsgs - 2].ts) / double(dx.hca_core_clock);
    EXPECT_GE(ms, 19.0);
    EXPECT_LT(ms, 1000.0);
  }
  EXPECT_EQ(ibv_destroy_cq(scq), 0);
  EXPECT_EQ(ibv_destroy_cq(rcq), 0);
}

// ---------------------------------------------------------------- resize

// Makes `n` completions pending in `cq`: from sends (cq is a's send CQ),
// receives (cq is b's receive CQ), or both (cq is both).
enum class Source { kSends, kRecvs, kMixed };

struct ResizeCase {
  const char* name;
  Source src;
};

const ResizeCase kResizeCases[] = {{"sends", Source::kSends}, {"recvs", Source::kRecvs}, {"mixed", Source::kMixed}};

struct Pending {
  ibv_cq* cq = nullptr;
  ibv_cq* other = nullptr;
  std::unique_ptr<Link> link;
  std::unique_ptr<Buffer> buf;
  ~Pending() {
    link.reset();
    if (cq) ibv_destroy_cq(cq);
    if (other) ibv_destroy_cq(other);
  }
  // Makes `n` completions pending in cq; returns how many are in cq.
  int make(Device& dev, int cqe, Source s, int n) {
    cq = ibv_create_cq(dev.ctx, cqe, nullptr, nullptr, 0);
    other = ibv_create_cq(dev.ctx, 256, nullptr, nullptr, 0);
    if (!cq || !other) return -1;
    ibv_cq* a_scq = s == Source::kRecvs ? other : cq;
    ibv_cq* b_rcq = s == Source::kSends ? other : cq;
    link = std::make_unique<Link>(dev, IBV_QPT_RC, a_scq, other, other, b_rcq, 64);
    if (!link->ok) return -1;
    buf = std::make_unique<Buffer>(dev.pd, 64 * 16);
    int msgs = s == Source::kMixed ? n / 2 : n;
    for (int i = 0; i < msgs; ++i)
      if (post_recv(link->b, 1000 + i, buf->sge(i * 16, 16))) return -1;
    for (int i = 0; i < msgs; ++i) {
      ibv_sge sg = buf->sge(0, 8);
      if (link->send(i, &sg, 1)) return -1;
    }
    return msgs * (s == Source::kMixed ? 2 : 1);
  }
};

TEST(CqResize, GrowKeepsPendingEntries) {
  for (const ResizeCase& c : kResizeCases) {
    SCOPED_TRACE(c.name);
    Device dev;
    Pending p;
    int n = p.make(dev, 8, c.src, 6);
    ASSERT_EQ(n, 6);
    sleep_ms(2);
    ASSERT_EQ(ibv_resize_cq(p.cq, 200), 0);
    EXPECT_GE(p.cq->cqe, 200);
    auto wcs = wait_wc(p.cq, n, 1000);
    ASSERT_EQ(int(wcs.size()), n);
    std::vector<uint64_t> send_ids, recv_ids;
    for (auto& w : wcs) {
      EXPECT_EQ(w.status, IBV_WC_SUCCESS);
      (w.opcode == IBV_WC_RECV ? recv_ids : send_ids).push_back(w.wr_id);
    }
    for (size_t i = 0; i < send_ids.size(); ++i) EXPECT_EQ(send_ids[i], i);
    for (size_t i = 0; i < recv_ids.size(); ++i) EXPECT_EQ(recv_ids[i], 1000 + i);
    EXPECT_TRUE(drain(p.cq, 5).empty());
  }
}

TEST(CqResize, ShrinkBelowPendingCountFails) {
  for (const ResizeCase& c : kResizeCases) {
    SCOPED_TRACE(c.name);
    Device dev;
    Pending p;
    int n = p.make(dev, 64, c.src, 10);
    ASSERT_EQ(n, 10);
    // Shrinking to fewer entries than are pending must not lose completions:
    // the verbs refuse it. (If the library shrinks anyway, cq->cqe tells how
    // many the CQ claims to hold.)
    int rc = ibv_resize_cq(p.cq, 4);
    EXPECT_NE(rc, 0) << "resize to 4 entries with 10 pending succeeded; cq->cqe is now " << p.cq->cqe;
    if (rc == 0) {
      EXPECT_GE(p.cq->cqe, n) << "the CQ holds more completions than its size";
    }
    auto wcs = wait_wc(p.cq, n, 1000);
    EXPECT_EQ(int(wcs.size()), n) << "pending completions were lost";
  }
}

// ---------------------------------------------------------------- order

// One CQ for both queues of two QPs talking to each other: a receive
// completion is added by the sender's delivery, a send completion by the
// sender's own completion step. Polled one at a time, as rping does, they
// come out in the order they were made, as from a NIC's CQ: everything of
// message k before anything of message k + 1. (Receive completions used to
// be taken first whenever one was waiting, so a steady stream of them kept
// the send completions, and the send queue slots they free, behind.)
TEST(CqOrder, OneCqForBothQueuesIsFirstInFirstOut) {
  Device dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 64, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  {
    Link link(dev, IBV_QPT_RC, cq, cq, cq, cq, 16);
    ASSERT_TRUE(link.ok);
    Buffer buf(dev.pd, 64 * 16);
    constexpr int kMessages = 6;
    for (int i = 0; i < kMessages; ++i) {
      ibv_qp* receiver = i % 2 ? link.a : link.b;
      ASSERT_EQ(post_recv(receiver, 100 + i, buf.sge(i * 16, 16)), 0);
    }
    for (int i = 0; i < kMessages; ++i) {
      ibv_qp* sender = i % 2 ? link.b : link.a;
      ibv_sge sg = buf.sge(512, 8);
      ibv_send_wr wr = make_wr(i, &sg, 1, IBV_WR_SEND, IBV_SEND_SIGNALED);
      ASSERT_EQ(post_send(sender, &wr), 0);
      sleep_ms(2);  // both completions of this message are made before the next
    }
    std::vector<int> message_of_each;
    for (int got = 0; got < 2 * kMessages;) {
      std::vector<ibv_wc> one = wait_wc(cq, 1, 1000);
      ASSERT_EQ(one.size(), 1u) << "after " << got << " completions";
      EXPECT_EQ(one[0].status, IBV_WC_SUCCESS);
      message_of_each.push_back(static_cast<int>(one[0].wr_id % 100));
      ++got;
    }
    for (size_t i = 1; i < message_of_each.size(); ++i)
      EXPECT_LE(message_of_each[i - 1], message_of_each[i]) << "completion " << i << " out of order";
  }
  ibv_destroy_cq(cq);
}

// Destroying a QP takes its waiting completions out of its CQs, as mlx5
// cleans a destroyed QP's CQEs (__mlx5_cq_clean): a program may close a
// connection and go on polling a CQ it shares with others. libfabric's rxm
// reposted a receive buffer on the closed endpoint of such a completion and
// died of SIGSEGV (under load, at the end of fi_pingpong -e rdm).
TEST(CqOrder, DestroyedQpsCompletionsGoWithIt) {
  Device dev;
  ibv_cq* shared = ibv_create_cq(dev.ctx, 64, nullptr, nullptr, 0);
  ibv_cq* other = ibv_create_cq(dev.ctx, 64, nullptr, nullptr, 0);
  ASSERT_TRUE(shared && other);
  Buffer buf(dev.pd, 4096);
  // Two connections; the first one's QPs complete into `shared`.
  auto first = std::make_unique<Link>(dev, IBV_QPT_RC, shared, shared, other, shared, 16);
  Link second(dev, IBV_QPT_RC, other, other, other, shared, 16);
  ASSERT_TRUE(first->ok && second.ok);
  ASSERT_EQ(post_recv(first->b, 1, buf.sge(0, 64)), 0);
  ASSERT_EQ(post_recv(second.b, 2, buf.sge(64, 64)), 0);
  ibv_sge sg = buf.sge(1024, 8);
  ibv_send_wr wr = make_wr(10, &sg, 1, IBV_WR_SEND, IBV_SEND_SIGNALED);
  ASSERT_EQ(post_send(first->a, &wr), 0);  // a send completion (shared) and a receive one (shared)
  wr.wr_id = 20;
  ASSERT_EQ(post_send(second.a, &wr), 0);  // a receive completion (shared) from another QP
  sleep_ms(50);
  const uint32_t gone_a = first->a->qp_num, gone_b = first->b->qp_num;
  first.reset();  // destroys both QPs of the first connection, completions unpolled
  std::vector<ibv_wc> left = wait_wc(shared, 8, 200);
  ASSERT_EQ(left.size(), 1u) << "only the other connection's completion is left";
  EXPECT_EQ(left[0].wr_id, 2u);
  EXPECT_EQ(left[0].qp_num, second.b->qp_num);
  for (const ibv_wc& wc : left) EXPECT_TRUE(wc.qp_num != gone_a && wc.qp_num != gone_b);
  // The CQ goes on as before for the QPs that remain.
  ASSERT_EQ(post_recv(second.b, 3, buf.sge(128, 64)), 0);
  wr.wr_id = 21;
  ASSERT_EQ(post_send(second.a, &wr), 0);
  std::vector<ibv_wc> next = wait_wc(shared, 1, 1000);
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].wr_id, 3u);
  EXPECT_EQ(next[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wait_wc(other, 2, 1000).size(), 2u) << "the other CQ's send completions";
}

// Moving a QP to RESET takes its waiting completions out of its CQs, as
// mlx5_modify_qp does (mlx5_cq_clean): rdma-core's tests reset QPs after an
// error (restate_qps) and then polled the old flush completions as the
// answer to their new traffic. Completions made after the QP is used again
// are kept, even within moments.
TEST(CqOrder, ResetTakesTheQpsWaitingCompletionsOut) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  Buffer buf(dev.pd, 4096);
  ASSERT_EQ(post_recv(p.b, 1, buf.sge(0, 64)), 0);
  ASSERT_EQ(post_recv(p.b, 2, buf.sge(64, 64)), 0);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;
  ASSERT_EQ(ibv_modify_qp(p.b, &a, IBV_QP_STATE), 0);  // two flush completions wait in cq_b
  sleep_ms(20);
  a.qp_state = IBV_QPS_RESET;
  ASSERT_EQ(ibv_modify_qp(p.a, &a, IBV_QP_STATE), 0);
  ASSERT_EQ(ibv_modify_qp(p.b, &a, IBV_QP_STATE), 0);
  ASSERT_EQ(connect_qp(p.a, p.b->qp_num), 0);
  ASSERT_EQ(connect_qp(p.b, p.a->qp_num), 0);
  ASSERT_EQ(post_recv(p.b, 3, buf.sge(128, 64)), 0);
  ibv_sge sg = buf.sge(1024, 8);
  ibv_send_wr wr = make_wr(10, &sg, 1, IBV_WR_SEND, IBV_SEND_SIGNALED);
  ASSERT_EQ(post_send(p.a, &wr), 0);
  std::vector<ibv_wc> got = wait_wc(p.cq_b, 3, 500);
  ASSERT_EQ(got.size(), 1u) << "the flushes of before the reset were polled";
  EXPECT_EQ(got[0].wr_id, 3u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
  got = wait_wc(p.cq_a, 1, 1000);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].status, IBV_WC_SUCCESS);
}

// ---------------------------------------------------------------- destroy rules

TEST(CqDestroy, BusyWhileAQpOrSrqQpUsesIt) {
  struct Case {
    const char* name;
    bool as_send, as_recv, with_srq;
  } cases[] = {
      {"send_cq", true, false, false},
      {"recv_cq", false, true, false},
      {"both", true, true, false},
      {"recv_cq_of_qp_with_srq", false, true, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Device dev;
    ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
    ibv_cq* other = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
    ASSERT_TRUE(cq && other);
    ibv_srq* srq = nullptr;
    if (c.with_srq) {
      srq = create_srq(dev.pd, 16);
      ASSERT_NE(srq, nullptr);
    }
    ibv_qp* qp = create_qp(dev.pd, IBV_QPT_RC, c.as_send ? cq : other, c.as_recv ? cq : other, 16, srq);
    ASSERT_NE(qp, nullptr);
    int rc = ibv_destroy_cq(cq);
    EXPECT_EQ(rc, EBUSY);
    if (rc == 0) cq = nullptr;
    EXPECT_EQ(ibv_destroy_qp(qp), 0);
    if (cq) {
      EXPECT_EQ(ibv_destroy_cq(cq), 0);
    }
    if (srq) {
      EXPECT_EQ(ibv_destroy_srq(srq), 0);
    }
    EXPECT_EQ(ibv_destroy_cq(other), 0);
  }
}

// ---------------------------------------------------------------- completion channels

// b's receive completions go to a CQ on a channel; everything else elsewhere.
struct ChannelSetup {
  Device dev;
  ibv_comp_channel* ch = nullptr;
  ibv_cq* ev_cq = nullptr;  // b's receive CQ, on the channel
  ibv_cq* plain = nullptr;
  std::unique_ptr<Link> link;
  std::unique_ptr<Buffer> src, dst;
  int marker = 0;
  bool ok = false;

  explicit ChannelSetup(ibv_qp_type t = IBV_QPT_RC) {
    ch = ibv_create_comp_channel(dev.ctx);
    if (!ch) return;
    ev_cq = ibv_create_cq(dev.ctx, 64, &marker, ch, 0);
    plain = ibv_create_cq(dev.ctx, 64, nullptr, nullptr, 0);
    if (!ev_cq || !plain) return;
    link = std::make_unique<Link>(dev, t, plain, plain, plain, ev_cq, 32);
    src = std::make_unique<Buffer>(dev.pd, 4096);
    dst = std::make_unique<Buffer>(dev.pd, 32 * 128);
    ok = link->ok;
  }
  ~ChannelSetup() {
    link.reset();
    if (ev_cq) ibv_destroy_cq(ev_cq);
    if (plain) ibv_destroy_cq(plain);
    if (ch) ibv_destroy_comp_channel(ch);
  }
  // One message a -> b (b's receive posted first).
  void message(uint64_t id, unsigned flags = IBV_SEND_SIGNALED) {
    ASSERT_EQ(post_recv(link->b, id, dst->sge((id % 32) * 128, 128)), 0);
    ibv_sge s = src->sge(0, 64);
    ASSERT_EQ(link->send(id, &s, 1, flags), 0);
    auto w = wait_wc(plain, 1, 1000);
    ASSERT_EQ(w.size(), 1u);
    ASSERT_EQ(w[0].status, IBV_WC_SUCCESS);
  }
};

TEST(CompChannel, FdIsPollableAndQuietInitially) {
  ChannelSetup s;
  ASSERT_TRUE(s.ok);
  EXPECT_GE(s.ch->fd, 0);
  EXPECT_EQ(s.ev_cq->channel, s.ch);
  EXPECT_FALSE(readable(s.ch->fd, 0));
}

TEST(CompChannel, ArmedCompletionWakesTheChannel) {
  ChannelSetup s;
  ASSERT_TRUE(s.ok);
  ASSERT_EQ(ibv_req_notify_cq(s.ev_cq, 0), 0);
  s.message(1);
  ASSERT_TRUE(readable(s.ch->fd, 1000)) << "no completion event after an armed completion";
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(s.ch, &cq, &ctx), 0);
  EXPECT_EQ(cq, s.ev_cq);
  EXPECT_EQ(ctx, &s.marker);
  auto w = wait_wc(s.ev_cq, 1, 1000);
  ASSERT_EQ(w.size(), 1u);
  EXPECT_EQ(w[0].wr_id, 1u);
  // The only event was consumed: the fd must not stay readable (an
  // application that poll()s the fd and then calls the blocking
  // ibv_get_cq_event would block with nothing to return).
  EXPECT_FALSE(readable(s.ch->fd, 0)) << "channel fd still readable after its only event was returned";
  // Drain whatever the fd still holds, without blocking: there is no event.
  int fl = fcntl(s.ch->fd, F_GETFL);
  ASSERT_EQ(fcntl(s.ch->fd, F_SETFL, fl | O_NONBLOCK), 0);
  ibv_cq* none = nullptr;
  void* none_ctx = nullptr;
  errno = 0;
  EXPECT_EQ(ibv_get_cq_event(s.ch, &none, &none_ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
  // The arm fired once: a second completion without re-arming wakes nobody.
  s.message(2);
  EXPECT_FALSE(readable(s.ch->fd, 100)) << "an unarmed CQ woke the channel";
  ibv_ack_cq_events(cq, 1);
  // Re-armed, the next completion fires again.
  ASSERT_EQ(ibv_req_notify_cq(s.ev_cq, 0), 0);
  EXPECT_EQ(wait_wc(s.ev_cq, 1, 1000).size(), 1u);
  s.message(3);
  ASSERT_TRUE(readable(s.ch->fd, 1000));
  ASSERT_EQ(ibv_get_cq_event(s.ch, &cq, &ctx), 0);
  EXPECT_EQ(cq, s.ev_cq);
  ibv_ack_cq_events(cq, 1);
  // ack then destroy: must not block.
  s.link.reset();
  EXPECT_EQ(ibv_destroy_cq(s.ev_cq), 0);
  s.ev_cq = nullptr;
}

TEST(CompChannel, NoEventWithoutArming) {
  ChannelSetup s;
  ASSERT_TRUE(s.ok);
  s.message(1);
  EXPECT_FALSE(readable(s.ch->fd, 200));
  EXPECT_EQ(wait_wc(s.ev_cq, 1, 1000).size(), 1u) << "the completion itself arrived";
}

TEST(CompChannel, SolicitedOnlyArming) {
  ChannelSetup s;
  ASSERT_TRUE(s.ok);
  ASSERT_EQ(ibv_req_notify_cq(s.ev_cq, 1), 0);
  s.message(1, IBV_SEND_SIGNALED);
  EXPECT_FALSE(readable(s.ch->fd, 200)) << "an unsolicited completion woke a solicited-only arm";
  s.message(2, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
  ASSERT_TRUE(readable(s.ch->fd, 1000)) << "a solicited completion did not wake the channel";
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(s.ch, &cq, &ctx), 0);
  EXPECT_EQ(cq, s.ev_cq);
  ibv_ack_cq_events(cq, 1);
  auto w = wait_wc(s.ev_cq, 2, 1000);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_EQ(w[0].wr_id, 1u);
  EXPECT_EQ(w[1].wr_id, 2u);
}

TEST(CompChannel, SolicitedOnlyArmingForUd) {
  ChannelSetup s(IBV_QPT_UD);
  ASSERT_TRUE(s.ok);
  ASSERT_EQ(ibv_req_notify_cq(s.ev_cq, 1), 0);
  s.message(1, IBV_SEND_SIGNALED);
  EXPECT_FALSE(readable(s.ch->fd, 200));
  s.message(2, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED);
  ASSERT_TRUE(readable(s.ch->fd, 1000));
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(s.ch, &cq, &ctx), 0);
  ibv_ack_cq_events(cq, 1);
}

TEST(CompChannel, NonBlockingFdGivesEagain) {
  ChannelSetup s;
  ASSERT_TRUE(s.ok);
  int fl = fcntl(s.ch->fd, F_GETFL);
  ASSERT_EQ(fcntl(s.ch->fd, F_SETFL, fl | O_NONBLOCK), 0);
  ibv_cq* cq = nullptr;
  void* ctx = nullptr;
  errno = 0;
  EXPECT_EQ(ibv_get_cq_event(s.ch, &cq, &ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
  // With an event pending the non-blocking call returns it.
  ASSERT_EQ(ibv_req_notify_cq(s.ev_cq, 0), 0);
  s.message(1);
  ASSERT_TRUE(readable(s.ch->fd, 1000));
  ASSERT_EQ(ibv_get_cq_event(s.ch, &cq, &ctx), 0);
  EXPECT_EQ(cq, s.ev_cq);
  ibv_ack_cq_events(cq, 1);
  errno = 0;
  EXPECT_EQ(ibv_get_cq_event(s.ch, &cq, &ctx), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST(CompChannel, EventNamesTheCqThatFired) {
  Device dev;
  ibv_comp_channel* ch = ibv_create_comp_channel(dev.ctx);
  ASSERT_NE(ch, nullptr);
  int m1 = 1, m2 = 2;
  ibv_cq* c1 = ibv_create_cq(dev.ctx, 16, &m1, ch, 0);
  ibv_cq* c2 = ibv_create_cq(dev.ctx, 16, &m2, ch, 0);
  ibv_cq* plain = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ASSERT_TRUE(c1 && c2 && plain);
  {
    Link l(dev, IBV_QPT_RC, plain, plain, plain, c2);
    ASSERT_TRUE(l.ok);
    Buffer b(dev.pd, 256);
    ASSERT_EQ(ibv_req_notify_cq(c1, 0), 0);
    ASSERT_EQ(ibv_req_notify_cq(c2, 0), 0);
    ASSERT_EQ(post_recv(l.b, 1, b.sge(128, 128)), 0);
    ibv_sge sg = b.sge(0, 16);
    ASSERT_EQ(l.send(1, &sg, 1), 0);
    ASSERT_TRUE(readable(ch->fd, 1000));
    ibv_cq* cq = nullptr;
    void* ctx = nullptr;
    ASSERT_EQ(ibv_get_cq_event(ch, &cq, &ctx), 0);
    EXPECT_EQ(cq, c2);
    EXPECT_EQ(ctx, &m2);
    ibv_ack_cq_events(cq, 1);
    // c1 had no completion: no second event (checked without blocking).
    int fl = fcntl(ch->fd, F_GETFL);
    ASSERT_EQ(fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK), 0);
    errno = 0;
    EXPECT_EQ(ibv_get_cq_event(ch, &cq, &ctx), -1) << "unexpected second event";
    EXPECT_EQ(errno, EAGAIN);
    EXPECT_EQ(wait_wc(plain, 1, 1000).size(), 1u);
  }
  EXPECT_EQ(ibv_destroy_cq(c1), 0);
  EXPECT_EQ(ibv_destroy_cq(c2), 0);
  EXPECT_EQ(ibv_destroy_cq(plain), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
}

TEST(CompChannel, DestroyChannelInUseFails) {
  Device dev;
  ibv_comp_channel* ch = ibv_create_comp_channel(dev.ctx);
  ASSERT_NE(ch, nullptr);
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, ch, 0);
  ASSERT_NE(cq, nullptr);
  int rc = ibv_destroy_comp_channel(ch);
  EXPECT_NE(rc, 0) << "a channel with a CQ was destroyed";
  if (rc != 0) {
    EXPECT_EQ(errno, EBUSY);
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
    EXPECT_EQ(ibv_destroy_comp_channel(ch), 0);
  }
}

// ---------------------------------------------------------------- overrun

// A 2-entry CQ gets more completions than it holds: IBV_EVENT_CQ_ERR.
// "mixed": send and receive completions share the small CQ, neither kind
// alone exceeds cq->cqe but together they do.
TEST(CqOverrun, RaisesCqErrAsyncEvent) {
  struct Case {
    const char* name;
    bool sends;  // the small CQ is a's send CQ
    bool recvs;  // the small CQ is b's receive CQ
  } cases[] = {{"receive_completions", false, true}, {"send_completions", true, false}, {"mixed", true, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Device dev;
    int fl = fcntl(dev.ctx->async_fd, F_GETFL);
    ASSERT_EQ(fcntl(dev.ctx->async_fd, F_SETFL, fl | O_NONBLOCK), 0);
    EXPECT_FALSE(readable(dev.ctx->async_fd, 0));
    ibv_cq* small = ibv_create_cq(dev.ctx, 2, nullptr, nullptr, 0);
    ibv_cq* big = ibv_create_cq(dev.ctx, 256, nullptr, nullptr, 0);
    ASSERT_TRUE(small && big);
    // More completions than the CQ holds, whatever its rounding.
    const int n = c.sends && c.recvs ? small->cqe : small->cqe + 6;
    const int total = n * ((c.sends ? 1 : 0) + (c.recvs ? 1 : 0));
    ASSERT_GT(total, small->cqe);
    bool got_event = false;
    {
      Link l(dev, IBV_QPT_RC, c.sends ? small : big, big, big, c.recvs ? small : big, 64);
      ASSERT_TRUE(l.ok);
      Buffer b(dev.pd, 64 * 64);
      for (int i = 0; i < n; ++i) ASSERT_EQ(post_recv(l.b, i, b.sge(i * 64, 64)), 0);
      for (int i = 0; i < n; ++i) {
        ibv_sge sg = b.sge(0, 8);
        ASSERT_EQ(l.send(i, &sg, 1), 0);
      }
      if (readable(dev.ctx->async_fd, 300)) {
        ibv_async_event ev{};
        ASSERT_EQ(ibv_get_async_event(dev.ctx, &ev), 0);
        EXPECT_EQ(ev.event_type, IBV_EVENT_CQ_ERR) << ibv_event_type_str(ev.event_type);
        if (ev.event_type == IBV_EVENT_CQ_ERR) {
          EXPECT_EQ(ev.element.cq, small);
          got_event = true;
        }
        ibv_ack_async_event(&ev);
      }
      EXPECT_TRUE(got_event) << "no IBV_EVENT_CQ_ERR after " << total << " completions into a CQ of "
                             << small->cqe;
      if (!got_event) {
        EXPECT_LE(int(drain(small, 0).size()), small->cqe) << "the CQ holds more completions than cq->cqe";
      }
    }
    EXPECT_EQ(ibv_destroy_cq(small), 0);
    EXPECT_EQ(ibv_destroy_cq(big), 0);
  }
}

// A peer's error flagged on a QP (its CQ's attention bit) is handled by a
// poll of that CQ, which moves the QP to ERR under its sq_mu; modify_qp
// to RESET holds that sq_mu while it cleans the CQ under poll_mu. Were the
// poll to handle the flag under poll_mu, the two calls could each wait for
// the other for ever (the hang watchdog would end this test with both
// stacks). Here one thread polls while the other resets, round after round.
TEST(CqAttention, APollAndAResetOfTheFlaggedQpNeverWaitForEachOther) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  Buffer local(dev.pd, 4096), remote(dev.pd, 4096);
  std::atomic<bool> stop{false};
  std::thread poller([&] {
    ibv_wc wc[4];
    while (!stop.load(std::memory_order_relaxed)) ibv_poll_cq(p.cq_b, 4, wc);
  });
  for (int round = 0; round < 300; ++round) {
    // A WRITE with a bad rkey: a is told REM_ACCESS_ERR, b is flagged.
    ibv_sge ls = local.sge(0, 64);
    ibv_send_wr wr = write_wr(&ls, 1, remote.addr(), remote.mr->rkey ^ 0x00770000u);
    ASSERT_EQ(post_send(p.a, &wr), 0);
    auto s = wait_wc(p.cq_a, 1, 2000);
    ASSERT_EQ(s.size(), 1u) << "round " << round;
    EXPECT_EQ(s[0].status, IBV_WC_REM_ACCESS_ERR);
    // Both to RESET (b's while the poller may be handling its flag), and
    // connected again.
    ASSERT_EQ(reset_and_reconnect(p), 0);
  }
  stop = true;
  poller.join();
}

}  // namespace
