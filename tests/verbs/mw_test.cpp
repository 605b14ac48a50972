// Memory windows, type 1 and type 2 (ibv_alloc_mw, ibv_bind_mw, BIND_MW and
// LOCAL_INV work requests, SEND with invalidate, the ibv_wr_* forms), with
// the rkey checks they imply.
#include <gtest/gtest.h>

#include <cstring>

#include "verbs_fixture.h"
#include "verbs_test_util.h"

using namespace svtest;
using namespace svtest::util;

namespace {

constexpr int kMrAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                          IBV_ACCESS_MW_BIND;

ibv_send_wr rdma_wr(ibv_sge* sg, ibv_wr_opcode op, uint64_t remote, uint32_t rkey) {
  ibv_send_wr wr = make_wr(1, sg, 1, op);
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  return wr;
}

// Posts a type 2 BIND_MW on `qp` and waits for its completion.
ibv_wc_status bind_type2(ibv_qp* qp, ibv_cq* cq, ibv_mw* mw, uint32_t rkey, ibv_mr* mr, uint64_t addr,
                         uint64_t len, unsigned access) {
  ibv_send_wr wr{};
  wr.wr_id = 5;
  wr.opcode = IBV_WR_BIND_MW;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.bind_mw.mw = mw;
  wr.bind_mw.rkey = rkey;
  wr.bind_mw.bind_info.mr = mr;
  wr.bind_mw.bind_info.addr = addr;
  wr.bind_mw.bind_info.length = len;
  wr.bind_mw.bind_info.mw_access_flags = access;
  return post_and_wait(qp, cq, wr);
}

ibv_wc_status type1_bind(ibv_qp* qp, ibv_cq* cq, ibv_mw* mw, ibv_mr* mr, uint64_t addr, uint64_t len,
                         unsigned access) {
  ibv_mw_bind b{};
  b.wr_id = 6;
  b.send_flags = IBV_SEND_SIGNALED;
  b.bind_info.mr = mr;
  b.bind_info.addr = addr;
  b.bind_info.length = len;
  b.bind_info.mw_access_flags = access;
  if (ibv_bind_mw(qp, mw, &b)) return IBV_WC_GENERAL_ERR;
  auto wc = poll_n(cq, 1);
  if (wc.size() != 1) return IBV_WC_GENERAL_ERR;
  EXPECT_EQ(wc[0].opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(wc[0].wr_id, 6u);
  return wc[0].status;
}

}  // namespace

TEST(Mw, DeviceAdvertisesBothTypes) {
  Device dev;
  ibv_device_attr a{};
  ASSERT_EQ(ibv_query_device(dev.ctx, &a), 0);
  EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW);
  EXPECT_TRUE(a.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
  EXPECT_GT(a.max_mw, 0);
  errno = 0;
  EXPECT_EQ(ibv_alloc_mw(dev.pd, static_cast<ibv_mw_type>(3)), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST(Mw, Type1GrantsExactlyItsRangeAndAccess) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);  // a owns the memory; b reaches it
  Buffer mem(dev.pd, 8192, kMrAccess), src(dev.pd, 4096), back(dev.pd, 4096);
  fill_pattern(src.bytes.data(), 4096, 3);
  ibv_mw* mw = ibv_alloc_mw(dev.pd, IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  EXPECT_EQ(mw->type, IBV_MW_TYPE_1);
  const uint32_t unbound = mw->rkey;
  ibv_sge s = src.sge(0, 100);
  ibv_send_wr wr = rdma_wr(&s, IBV_WR_RDMA_WRITE, mem.addr() + 1000, unbound);
  EXPECT_EQ(post_and_wait(p.b, p.cq_b, wr), IBV_WC_REM_ACCESS_ERR) << "an unbound window grants nothing";

  QpPair q(dev, IBV_QPT_RC);
  ASSERT_EQ(type1_bind(q.a, q.cq_a, mw, mem.mr, mem.addr() + 1000, 2000, IBV_ACCESS_REMOTE_WRITE), IBV_WC_SUCCESS);
  EXPECT_NE(mw->rkey, unbound) << "binding gives the window a new rkey";
  EXPECT_EQ(mw->rkey >> 8, unbound >> 8) << "only the key byte changes";
  wr = rdma_wr(&s, IBV_WR_RDMA_WRITE, mem.addr() + 1500, mw->rkey);
  ASSERT_EQ(post_and_wait(q.b, q.cq_b, wr), IBV_WC_SUCCESS);  // type 1: any QP of the PD
  EXPECT_TRUE(has_pattern(mem.bytes.data() + 1500, 100, 3));

  QpPair r(dev, IBV_QPT_RC);
  wr = rdma_wr(&s, IBV_WR_RDMA_WRITE, mem.addr() + 2950, mw->rkey);  // ends past the window
  EXPECT_EQ(post_and_wait(r.b, r.cq_b, wr), IBV_WC_REM_ACCESS_ERR);
  QpPair r2(dev, IBV_QPT_RC);
  ibv_sge bs = back.sge(0, 100);
  wr = rdma_wr(&bs, IBV_WR_RDMA_READ, mem.addr() + 1500, mw->rkey);  // write only
  EXPECT_EQ(post_and_wait(r2.b, r2.cq_b, wr), IBV_WC_REM_ACCESS_ERR);
  QpPair r3(dev, IBV_QPT_RC);
  wr = rdma_wr(&s, IBV_WR_RDMA_WRITE, mem.addr() + 1500, mw->rkey);
  wr.sg_list->lkey = mw->rkey;  // a window's key is no lkey
  EXPECT_EQ(post_and_wait(r3.a, r3.cq_a, wr), IBV_WC_LOC_PROT_ERR);

  // The MR cannot go while the window is bound to it; unbinding frees it.
  EXPECT_EQ(ibv_dereg_mr(mem.mr), EBUSY);
  const uint32_t bound = mw->rkey;
  QpPair u(dev, IBV_QPT_RC);
  ASSERT_EQ(type1_bind(u.a, u.cq_a, mw, mem.mr, 0, 0, 0), IBV_WC_SUCCESS);  // zero length: unbind
  QpPair v(dev, IBV_QPT_RC);
  s = src.sge(0, 100);
  wr = rdma_wr(&s, IBV_WR_RDMA_WRITE, mem.addr() + 1500, bound);
  EXPECT_EQ(post_and_wait(v.b, v.cq_b, wr), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST(Mw, Type1BindRulesAsTheManPageSays) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  Buffer mem(dev.pd, 4096, kMrAccess);
  Buffer no_bind(dev.pd, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  Buffer read_only(dev.pd, 4096, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_MW_BIND);
  ibv_mw* mw1 = ibv_alloc_mw(dev.pd, IBV_MW_TYPE_1);
  ibv_mw* mw2 = ibv_alloc_mw(dev.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw1, nullptr);
  ASSERT_NE(mw2, nullptr);
  ibv_mw_bind b{};
  b.send_flags = IBV_SEND_SIGNALED;
  b.bind_info.mr = mem.mr;
  b.bind_info.addr = mem.addr();
  b.bind_info.length = 100;
  b.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
  EXPECT_EQ(ibv_bind_mw(p.a, mw2, &b), EINVAL);  // type 2 binds with a work request
  b.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ZERO_BASED;
  EXPECT_EQ(ibv_bind_mw(p.a, mw1, &b), EINVAL);
  b.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ;
  b.bind_info.mr = nullptr;
  EXPECT_EQ(ibv_bind_mw(p.a, mw1, &b), EINVAL);  // a range without an MR
  ibv_pd* other = ibv_alloc_pd(dev.ctx);
  {
    Buffer elsewhere(other, 4096, kMrAccess);
    b.bind_info.mr = elsewhere.mr;
    b.bind_info.addr = elsewhere.addr();
    EXPECT_EQ(ibv_bind_mw(p.a, mw1, &b), EPERM);  // the MR of another PD
  }
  // Checked when the work request executes: a bind error completion and
  // the QP in the error state.
  EXPECT_EQ(type1_bind(p.a, p.cq_a, mw1, no_bind.mr, no_bind.addr(), 100, IBV_ACCESS_REMOTE_READ),
            IBV_WC_MW_BIND_ERR);  // MR without IBV_ACCESS_MW_BIND
  EXPECT_EQ(qp_state(p.a), IBV_QPS_ERR);
  QpPair q(dev, IBV_QPT_RC);
  EXPECT_EQ(type1_bind(q.a, q.cq_a, mw1, mem.mr, mem.addr() + 4000, 200, IBV_ACCESS_REMOTE_READ),
            IBV_WC_MW_BIND_ERR);  // past the MR
  QpPair r(dev, IBV_QPT_RC);
  EXPECT_EQ(type1_bind(r.a, r.cq_a, mw1, read_only.mr, read_only.addr(), 100, IBV_ACCESS_REMOTE_WRITE),
            IBV_WC_MW_BIND_ERR);  // remote write over an MR without local write
  EXPECT_EQ(ibv_dealloc_mw(mw1), 0);
  EXPECT_EQ(ibv_dealloc_mw(mw2), 0);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
}

TEST(Mw, Type2IsBoundToItsQpAndInvalidatedLocally) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);  // the window is bound on p.a: only p.a's peer may use it
  Buffer mem(dev.pd, 8192, kMrAccess), src(dev.pd, 4096);
  fill_pattern(src.bytes.data(), 4096, 8);
  ibv_mw* mw = ibv_alloc_mw(dev.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  uint32_t rkey = ibv_inc_rkey(mw->rkey);
  ASSERT_EQ(bind_type2(p.a, p.cq_a, mw, rkey, mem.mr, mem.addr(), 4096,
                       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ),
            IBV_WC_SUCCESS);
  ibv_sge s = src.sge(0, 256);
  ibv_send_wr wr = rdma_wr(&s, IBV_WR_RDMA_WRITE, mem.addr() + 64, rkey);
  ASSERT_EQ(post_and_wait(p.b, p.cq_b, wr), IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(mem.bytes.data() + 64, 256, 8));
  QpPair other(dev, IBV_QPT_RC);  // the same PD, another QP: refused
  EXPECT_EQ(post_and_wait(other.b, other.cq_b, wr), IBV_WC_REM_ACCESS_ERR);

  // Bound windows bind again only after invalidation (a bind error: that
  // QP goes to the error state, so not p's).
  QpPair q(dev, IBV_QPT_RC);
  ASSERT_EQ(bind_type2(q.a, q.cq_a, mw, ibv_inc_rkey(rkey), mem.mr, mem.addr(), 4096, IBV_ACCESS_REMOTE_WRITE),
            IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(qp_state(q.a), IBV_QPS_ERR);
  QpPair r(dev, IBV_QPT_RC);
  // Not a window of ours (an MR's key): local invalidate fails.
  ibv_send_wr inv{};
  inv.opcode = IBV_WR_LOCAL_INV;
  inv.send_flags = IBV_SEND_SIGNALED;
  inv.invalidate_rkey = mem.mr->rkey;
  EXPECT_EQ(post_and_wait(r.a, r.cq_a, inv), IBV_WC_LOC_QP_OP_ERR);
  QpPair t(dev, IBV_QPT_RC);
  inv.invalidate_rkey = rkey;
  ASSERT_EQ(post_and_wait(t.a, t.cq_a, inv), IBV_WC_SUCCESS);
  // Through the QP it was bound to, the invalidated key is refused now.
  EXPECT_EQ(post_and_wait(p.b, p.cq_b, wr), IBV_WC_REM_ACCESS_ERR);
  QpPair n(dev, IBV_QPT_RC);
  rkey = ibv_inc_rkey(rkey);
  ASSERT_EQ(bind_type2(n.a, n.cq_a, mw, rkey, mem.mr, mem.addr() + 4096, 4096, IBV_ACCESS_REMOTE_WRITE),
            IBV_WC_SUCCESS);
  wr = rdma_wr(&s, IBV_WR_RDMA_WRITE, mem.addr() + 5000, rkey);
  EXPECT_EQ(post_and_wait(n.b, n.cq_b, wr), IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(mem.bytes.data() + 5000, 256, 8));
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST(Mw, SendWithInvalidateInvalidatesTheReceiversWindow) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  Buffer mem(dev.pd, 4096, kMrAccess), src(dev.pd, 4096), in(dev.pd, 4096);
  ibv_mw* mw = ibv_alloc_mw(dev.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  const uint32_t rkey = ibv_inc_rkey(mw->rkey);
  // Bound on p.b: the window of the receiving QP.
  ASSERT_EQ(bind_type2(p.b, p.cq_b, mw, rkey, mem.mr, mem.addr(), 4096, IBV_ACCESS_REMOTE_WRITE), IBV_WC_SUCCESS);
  ASSERT_EQ(post_recv(p.b, 40, in.sge(0, 4096)), 0);
  fill_pattern(src.bytes.data(), 4096, 11);
  ibv_sge s = src.sge(0, 300);
  ibv_send_wr wr = make_wr(7, &s, 1, IBV_WR_SEND_WITH_INV);
  wr.invalidate_rkey = rkey;
  ASSERT_EQ(post_and_wait(p.a, p.cq_a, wr), IBV_WC_SUCCESS);
  auto rc = wait_wc(p.cq_b, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(rc[0].opcode, IBV_WC_RECV);
  EXPECT_TRUE(rc[0].wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(rc[0].invalidated_rkey, rkey);
  EXPECT_EQ(rc[0].byte_len, 300u);
  EXPECT_TRUE(has_pattern(in.bytes.data(), 300, 11));
  ibv_send_wr write = rdma_wr(&s, IBV_WR_RDMA_WRITE, mem.addr(), rkey);
  EXPECT_EQ(post_and_wait(p.a, p.cq_a, write), IBV_WC_REM_ACCESS_ERR) << "the window is invalid now";

  // Invalidating what is not a window of the receiving QP is an invalid request.
  QpPair q(dev, IBV_QPT_RC);
  ASSERT_EQ(post_recv(q.b, 41, in.sge(0, 4096)), 0);
  wr.invalidate_rkey = mem.mr->rkey;
  EXPECT_EQ(post_and_wait(q.a, q.cq_a, wr), IBV_WC_REM_INV_REQ_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST(Mw, ExtendedPostApiBindsInvalidatesAndSendsWithInvalidate) {
  Device dev;
  ibv_cq* cq_a = ibv_create_cq(dev.ctx, 32, nullptr, nullptr, 0);
  ibv_cq* cq_b = ibv_create_cq(dev.ctx, 32, nullptr, nullptr, 0);
  ibv_qp_init_attr_ex ia{};
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  ia.pd = dev.pd;
  ia.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV |
                      IBV_QP_EX_WITH_RDMA_WRITE;
  ia.send_cq = ia.recv_cq = cq_a;
  ibv_qp* a = ibv_create_qp_ex(dev.ctx, &ia);
  ia.send_cq = ia.recv_cq = cq_b;
  ibv_qp* b = ibv_create_qp_ex(dev.ctx, &ia);
  ASSERT_NE(a, nullptr) << strerror(errno);
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(connect_qp(a, b->qp_num), 0);
  ASSERT_EQ(connect_qp(b, a->qp_num), 0);
  ibv_qp_ex* ax = ibv_qp_to_qp_ex(a);
  ibv_qp_ex* bx = ibv_qp_to_qp_ex(b);
  Buffer mem(dev.pd, 4096, kMrAccess), src(dev.pd, 4096), in(dev.pd, 4096);
  fill_pattern(src.bytes.data(), 4096, 13);
  ibv_mw* mw = ibv_alloc_mw(dev.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);
  uint32_t rkey = ibv_inc_rkey(mw->rkey);
  ibv_mw_bind_info info{mem.mr, mem.addr(), 4096, IBV_ACCESS_REMOTE_WRITE};
  ibv_wr_start(bx);
  bx->wr_id = 1;
  bx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_bind_mw(bx, mw, rkey, &info);
  ASSERT_EQ(ibv_wr_complete(bx), 0);
  auto wc = wait_wc(cq_b, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].opcode, IBV_WC_BIND_MW);
  // a writes through the window (bound to b, its peer), then invalidates
  // it with a SEND.
  ibv_wr_start(ax);
  ax->wr_id = 2;
  ax->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_rdma_write(ax, rkey, mem.addr() + 10);
  ibv_wr_set_sge(ax, src.mr->lkey, src.addr(), 500);
  ASSERT_EQ(ibv_wr_complete(ax), 0);
  wc = wait_wc(cq_a, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(mem.bytes.data() + 10, 500, 13));
  ASSERT_EQ(post_recv(b, 50, in.sge(0, 4096)), 0);
  ibv_wr_start(ax);
  ax->wr_id = 3;
  ibv_wr_send_inv(ax, rkey);
  ibv_wr_set_sge(ax, src.mr->lkey, src.addr(), 64);
  ASSERT_EQ(ibv_wr_complete(ax), 0);
  wc = wait_wc(cq_b, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_TRUE(wc[0].wc_flags & IBV_WC_WITH_INV);
  EXPECT_EQ(wc[0].invalidated_rkey, rkey);
  wait_wc(cq_a, 1);
  // Bound again on b, then invalidated locally with ibv_wr_local_inv.
  rkey = ibv_inc_rkey(rkey);
  ibv_wr_start(bx);
  bx->wr_id = 4;
  bx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_bind_mw(bx, mw, rkey, &info);
  bx->wr_id = 5;
  ibv_wr_local_inv(bx, rkey);
  ASSERT_EQ(ibv_wr_complete(bx), 0);
  wc = wait_wc(cq_b, 2);
  ASSERT_EQ(wc.size(), 2u);
  EXPECT_EQ(wc[0].opcode, IBV_WC_BIND_MW);
  EXPECT_EQ(wc[1].opcode, IBV_WC_LOCAL_INV);
  EXPECT_EQ(wc[1].status, IBV_WC_SUCCESS);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
  ibv_destroy_qp(a);
  ibv_destroy_qp(b);
  ibv_destroy_cq(cq_a);
  ibv_destroy_cq(cq_b);
}

// The windows of rdma-core's own test (tests/test_mr.py MWRC): an MR with
// LOCAL_WRITE | MW_BIND only, windows granting REMOTE_WRITE (with the
// meaningless LOCAL_WRITE in their access word, as programs pass it), RC
// QPs with LOCAL_WRITE | REMOTE_WRITE. The spec (C10-74) and rxe need only
// local write on the MR for a window that grants remote write; each bind form
// works, and each invalidation takes the window away.
namespace {

constexpr int kBindOnlyMr = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND;
constexpr unsigned kWindowWrite = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE;

// Two RC QPs (send ops for the ibv_wr_* forms) whose access word is the
// MWRC one.
struct MwrcPair {
  ibv_cq* cq_a = nullptr;
  ibv_cq* cq_b = nullptr;
  ibv_qp* a = nullptr;
  ibv_qp* b = nullptr;
  explicit MwrcPair(Device& dev) {
    cq_a = ibv_create_cq(dev.ctx, 32, nullptr, nullptr, 0);
    cq_b = ibv_create_cq(dev.ctx, 32, nullptr, nullptr, 0);
    ibv_qp_init_attr_ex ia{};
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
    ia.pd = dev.pd;
    ia.send_ops_flags = IBV_QP_EX_WITH_BIND_MW | IBV_QP_EX_WITH_LOCAL_INV | IBV_QP_EX_WITH_SEND_WITH_INV |
                        IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_SEND;
    ia.send_cq = ia.recv_cq = cq_a;
    a = ibv_create_qp_ex(dev.ctx, &ia);
    ia.send_cq = ia.recv_cq = cq_b;
    b = ibv_create_qp_ex(dev.ctx, &ia);
    if (!a || !b) return;
    for (auto [qp, peer] : {std::pair{a, b}, std::pair{b, a}}) {
      ibv_qp_attr at = valid_attr(dev.ctx, peer->qp_num);
      at.qp_state = IBV_QPS_INIT;
      at.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
      EXPECT_EQ(ibv_modify_qp(qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
      EXPECT_EQ(to_rtr(qp, peer->qp_num), 0);
      EXPECT_EQ(to_rts(qp), 0);
    }
  }
  ~MwrcPair() {
    if (a) ibv_destroy_qp(a);
    if (b) ibv_destroy_qp(b);
    ibv_destroy_cq(cq_a);
    ibv_destroy_cq(cq_b);
  }
  // a writes 256 bytes of `src` through `rkey` at `addr`: its status.
  ibv_wc_status write(Buffer& src, uint64_t addr, uint32_t rkey) {
    ibv_sge s = src.sge(0, 256);
    return post_and_wait(a, cq_a, rdma_wr(&s, IBV_WR_RDMA_WRITE, addr, rkey));
  }
};

}  // namespace

TEST(Mw, Type1OnALocalWriteOnlyMrCarriesWritesUntilUnbound) {
  Device dev;
  MwrcPair p(dev);
  ASSERT_TRUE(p.a && p.b);
  Buffer mem(dev.pd, 4096, kBindOnlyMr), src(dev.pd, 4096);
  fill_pattern(src.bytes.data(), 4096, 21);
  ibv_mw* mw = ibv_alloc_mw(dev.pd, IBV_MW_TYPE_1);
  ASSERT_NE(mw, nullptr);
  ASSERT_EQ(type1_bind(p.b, p.cq_b, mw, mem.mr, mem.addr(), 4096, kWindowWrite), IBV_WC_SUCCESS);
  EXPECT_EQ(p.write(src, mem.addr() + 100, mw->rkey), IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(mem.bytes.data() + 100, 256, 21));
  // Zero length unbinds it (rdma-core's invalidate_mw_type1).
  ASSERT_EQ(type1_bind(p.b, p.cq_b, mw, mem.mr, mem.addr(), 0, 0), IBV_WC_SUCCESS);
  EXPECT_EQ(p.write(src, mem.addr(), mw->rkey), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
}

TEST(Mw, Type2OnALocalWriteOnlyMrThroughEachBindFormAndEachInvalidation) {
  enum class Bind { kPostSend, kWrApi };
  enum class Invalidate { kLocal, kRemote, kDealloc };
  for (Bind how : {Bind::kPostSend, Bind::kWrApi}) {
    for (Invalidate inv : {Invalidate::kLocal, Invalidate::kRemote, Invalidate::kDealloc}) {
      SCOPED_TRACE(testing::Message() << "bind " << int(how) << " invalidate " << int(inv));
      Device dev;
      MwrcPair p(dev);
      ASSERT_TRUE(p.a && p.b);
      Buffer mem(dev.pd, 4096, kBindOnlyMr), src(dev.pd, 4096), in(dev.pd, 4096);
      fill_pattern(src.bytes.data(), 4096, 22);
      ibv_mw* mw = ibv_alloc_mw(dev.pd, IBV_MW_TYPE_2);
      ASSERT_NE(mw, nullptr);
      const uint32_t rkey = ibv_inc_rkey(mw->rkey);
      if (how == Bind::kPostSend) {
        ASSERT_EQ(bind_type2(p.b, p.cq_b, mw, rkey, mem.mr, mem.addr(), 4096, kWindowWrite), IBV_WC_SUCCESS);
      } else {
        ibv_qp_ex* bx = ibv_qp_to_qp_ex(p.b);
        ibv_mw_bind_info info{mem.mr, mem.addr(), 4096, kWindowWrite};
        ibv_wr_start(bx);
        bx->wr_id = 1;
        bx->wr_flags = IBV_SEND_SIGNALED;
        ibv_wr_bind_mw(bx, mw, rkey, &info);
        ASSERT_EQ(ibv_wr_complete(bx), 0);
        auto wc = wait_wc(p.cq_b, 1);
        ASSERT_EQ(wc.size(), 1u);
        ASSERT_EQ(wc[0].status, IBV_WC_SUCCESS);
      }
      EXPECT_EQ(p.write(src, mem.addr() + 8, rkey), IBV_WC_SUCCESS);
      EXPECT_TRUE(has_pattern(mem.bytes.data() + 8, 256, 22));
      if (inv == Invalidate::kLocal) {
        ibv_send_wr w{};
        w.opcode = IBV_WR_LOCAL_INV;
        w.send_flags = IBV_SEND_SIGNALED;
        w.invalidate_rkey = rkey;
        ASSERT_EQ(post_and_wait(p.b, p.cq_b, w), IBV_WC_SUCCESS);
      } else if (inv == Invalidate::kRemote) {
        ASSERT_EQ(post_recv(p.b, 9, in.sge(0, 4096)), 0);
        ibv_sge s = src.sge(0, 16);
        ibv_send_wr w = make_wr(8, &s, 1, IBV_WR_SEND_WITH_INV);
        w.invalidate_rkey = rkey;
        ASSERT_EQ(post_and_wait(p.a, p.cq_a, w), IBV_WC_SUCCESS);
        auto wc = wait_wc(p.cq_b, 1);
        ASSERT_EQ(wc.size(), 1u);
        EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
        EXPECT_TRUE(wc[0].wc_flags & IBV_WC_WITH_INV);
      } else {
        ASSERT_EQ(ibv_dealloc_mw(mw), 0);  // a bound type 2 window may be deallocated
        mw = nullptr;
      }
      EXPECT_EQ(p.write(src, mem.addr(), rkey), IBV_WC_REM_ACCESS_ERR);
      if (mw) {
        EXPECT_EQ(ibv_dealloc_mw(mw), 0);
      }
    }
  }
}

// Each bind rule of the IBA as rxe applies it (rxe_check_bind_mw): the
// bind completes with IBV_WC_MW_BIND_ERR, and nothing else.
TEST(Mw, EveryBindRuleOfTheSpec) {
  Device dev;
  Buffer mem(dev.pd, 8192, kBindOnlyMr), no_bind(dev.pd, 4096, IBV_ACCESS_LOCAL_WRITE),
      read_only(dev.pd, 4096, IBV_ACCESS_MW_BIND), src(dev.pd, 4096);
  fill_pattern(src.bytes.data(), 4096, 23);
  struct Row {
    const char* name;
    ibv_mr* mr;
    uint64_t addr, len;
    unsigned access;
    ibv_wc_status want;
  };
  const Row rows[] = {
      {"within the MR", mem.mr, mem.addr() + 4096, 4096, kWindowWrite, IBV_WC_SUCCESS},
      {"remote read on an MR without local write", read_only.mr, read_only.addr(), 4096, IBV_ACCESS_REMOTE_READ,
       IBV_WC_SUCCESS},
      {"zero length (type 2 cannot unbind by binding)", mem.mr, mem.addr(), 0, kWindowWrite, IBV_WC_MW_BIND_ERR},
      {"no MW_BIND on the MR (C10-73)", no_bind.mr, no_bind.addr(), 4096, kWindowWrite, IBV_WC_MW_BIND_ERR},
      {"remote write, MR without local write (C10-74)", read_only.mr, read_only.addr(), 4096,
       IBV_ACCESS_REMOTE_WRITE, IBV_WC_MW_BIND_ERR},
      {"remote atomic, MR without local write (C10-74)", read_only.mr, read_only.addr(), 4096,
       IBV_ACCESS_REMOTE_ATOMIC, IBV_WC_MW_BIND_ERR},
      {"beyond the MR's end (C10-75)", mem.mr, mem.addr() + 4096, 4097, kWindowWrite, IBV_WC_MW_BIND_ERR},
      {"before the MR's start (C10-75)", mem.mr, mem.addr() - 1, 16, kWindowWrite, IBV_WC_MW_BIND_ERR},
  };
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    MwrcPair p(dev);
    ASSERT_TRUE(p.a && p.b);
    ibv_mw* mw = ibv_alloc_mw(dev.pd, IBV_MW_TYPE_2);
    ASSERT_NE(mw, nullptr);
    const uint32_t rkey = ibv_inc_rkey(mw->rkey);
    EXPECT_EQ(bind_type2(p.b, p.cq_b, mw, rkey, r.mr, r.addr, r.len, r.access), r.want);
    if (r.want != IBV_WC_SUCCESS) {
      EXPECT_EQ(qp_state(p.b), IBV_QPS_ERR);  // a bind error is a QP error, as any failed WR's
    } else if (r.access & IBV_ACCESS_REMOTE_WRITE) {
      EXPECT_EQ(p.write(src, r.addr, rkey), IBV_WC_SUCCESS);
      EXPECT_EQ(p.write(src, r.addr + r.len - 255, rkey), IBV_WC_REM_ACCESS_ERR) << "one byte past the window";
    }
    EXPECT_EQ(ibv_dealloc_mw(mw), 0);
  }
  // A type 2 window binds through a QP of its own PD only (C10-72).
  ibv_pd* other = ibv_alloc_pd(dev.ctx);
  ibv_mw* foreign = ibv_alloc_mw(other, IBV_MW_TYPE_2);
  ASSERT_NE(foreign, nullptr);
  MwrcPair p(dev);
  EXPECT_EQ(bind_type2(p.b, p.cq_b, foreign, ibv_inc_rkey(foreign->rkey), mem.mr, mem.addr(), 64, kWindowWrite),
            IBV_WC_MW_BIND_ERR);
  EXPECT_EQ(ibv_dealloc_mw(foreign), 0);
  // A zero-based type 2 window: its addresses start at 0 where it was bound.
  MwrcPair z(dev);
  ibv_mw* zb = ibv_alloc_mw(dev.pd, IBV_MW_TYPE_2);
  const uint32_t zkey = ibv_inc_rkey(zb->rkey);
  ASSERT_EQ(bind_type2(z.b, z.cq_b, zb, zkey, mem.mr, mem.addr() + 1000, 1000,
                       IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ZERO_BASED),
            IBV_WC_SUCCESS);
  EXPECT_EQ(z.write(src, 10, zkey), IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(mem.bytes.data() + 1010, 256, 23));
  EXPECT_EQ(z.write(src, 1000 - 255, zkey), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dealloc_mw(zb), 0);
  ibv_dealloc_pd(other);
}
