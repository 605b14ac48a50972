// RDMA atomics (IBV_ATOMIC_HCA): compare-and-swap and fetch-and-add return
// the original value, are atomic across processes on both memory paths
// (shared overlay; process_vm_* under the host's atomic locks), and fail the
// way a device fails them.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "sanitizers.h"
#include "verbs_fixture.h"

using namespace svtest;

namespace {

ibv_send_wr atomic_wr(ibv_sge* local, ibv_wr_opcode op, uint64_t remote, uint32_t rkey, uint64_t compare_add,
                      uint64_t swap = 0) {
  ibv_send_wr wr{};
  wr.wr_id = 1;
  wr.sg_list = local;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.atomic.remote_addr = remote;
  wr.wr.atomic.rkey = rkey;
  wr.wr.atomic.compare_add = compare_add;
  wr.wr.atomic.swap = swap;
  return wr;
}

ibv_wc_status run(QpPair& p, ibv_send_wr wr) { return post_and_wait(p.a, p.cq_a, wr); }

constexpr int kAtomicAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC;

}  // namespace

TEST(Atomics, DeviceAdvertisesHcaAtomicity) {
  Device dev;
  ibv_device_attr a;
  ASSERT_EQ(ibv_query_device(dev.ctx, &a), 0);
  EXPECT_EQ(a.atomic_cap, IBV_ATOMIC_HCA);
  EXPECT_GT(a.max_qp_rd_atom, 0);
}

TEST(Atomics, CompareAndSwapAndFetchAndAdd) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  Buffer target(dev.pd, 64, kAtomicAccess), local(dev.pd, 64, kAtomicAccess);
  uint64_t* word = reinterpret_cast<uint64_t*>(target.bytes.data() + 8);
  uint64_t* result = reinterpret_cast<uint64_t*>(local.bytes.data());
  *word = 41;
  ibv_sge s = local.sge(0, 8);

  EXPECT_EQ(run(p, atomic_wr(&s, IBV_WR_ATOMIC_FETCH_AND_ADD, target.addr() + 8, target.mr->rkey, 1)), IBV_WC_SUCCESS);
  EXPECT_EQ(*result, 41u);
  EXPECT_EQ(*word, 42u);

  // Compare fails: nothing swapped, the current value comes back.
  EXPECT_EQ(run(p, atomic_wr(&s, IBV_WR_ATOMIC_CMP_AND_SWP, target.addr() + 8, target.mr->rkey, 7, 99)),
            IBV_WC_SUCCESS);
  EXPECT_EQ(*result, 42u);
  EXPECT_EQ(*word, 42u);
  // Compare matches: swapped.
  EXPECT_EQ(run(p, atomic_wr(&s, IBV_WR_ATOMIC_CMP_AND_SWP, target.addr() + 8, target.mr->rkey, 42, 99)),
            IBV_WC_SUCCESS);
  EXPECT_EQ(*result, 42u);
  EXPECT_EQ(*word, 99u);
}

TEST(Atomics, ExtendedPostApi) {
  Device dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ibv_qp_init_attr_ex ia{};
  ia.qp_type = IBV_QPT_RC;
  ia.send_cq = ia.recv_cq = cq;
  ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
  ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
  ia.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
  ia.pd = dev.pd;
  ia.send_ops_flags = IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP | IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD;
  ibv_qp* qp = ibv_create_qp_ex(dev.ctx, &ia);
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(connect_qp(qp, qp->qp_num), 0);  // connected to itself
  Buffer target(dev.pd, 64, kAtomicAccess), local(dev.pd, 64, kAtomicAccess);
  uint64_t* word = reinterpret_cast<uint64_t*>(target.bytes.data());
  *word = 5;
  ibv_qp_ex* x = ibv_qp_to_qp_ex(qp);
  ibv_wr_start(x);
  x->wr_id = 1;
  x->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_atomic_fetch_add(x, target.mr->rkey, target.addr(), 10);
  ibv_wr_set_sge(x, local.mr->lkey, local.addr(), 8);
  x->wr_id = 2;
  ibv_wr_atomic_cmp_swp(x, target.mr->rkey, target.addr(), 15, 1000);
  ibv_wr_set_sge(x, local.mr->lkey, local.addr() + 8, 8);
  ASSERT_EQ(ibv_wr_complete(x), 0);
  auto wcs = poll_n(cq, 2);
  ASSERT_EQ(wcs.size(), 2u);
  EXPECT_EQ(wcs[0].opcode, IBV_WC_FETCH_ADD);
  EXPECT_EQ(wcs[1].opcode, IBV_WC_COMP_SWAP);
  EXPECT_EQ(reinterpret_cast<uint64_t*>(local.bytes.data())[0], 5u);
  EXPECT_EQ(reinterpret_cast<uint64_t*>(local.bytes.data())[1], 15u);
  EXPECT_EQ(*word, 1000u);
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
}

TEST(Atomics, ErrorsAsADeviceGivesThem) {
  struct Case {
    const char* name;
    int target_access;
    uint64_t offset;     // into the target buffer
    uint32_t local_len;  // of the result buffer
    ibv_wc_status expect;
  } cases[] = {
      {"misaligned", kAtomicAccess, 4, 8, IBV_WC_REM_INV_REQ_ERR},
      {"no_remote_atomic_access", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0, 8, IBV_WC_REM_ACCESS_ERR},
      {"out_of_bounds", kAtomicAccess, 64, 8, IBV_WC_REM_ACCESS_ERR},
      {"result_buffer_too_small", kAtomicAccess, 0, 4, IBV_WC_LOC_LEN_ERR},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Device dev;
    QpPair p(dev, IBV_QPT_RC);
    Buffer target(dev.pd, 64, c.target_access), local(dev.pd, 64, kAtomicAccess);
    ibv_sge s = local.sge(0, c.local_len);
    EXPECT_EQ(run(p, atomic_wr(&s, IBV_WR_ATOMIC_FETCH_AND_ADD, target.addr() + c.offset, target.mr->rkey, 1)),
              c.expect);
    ibv_qp_attr a;
    ibv_qp_init_attr ia;
    ASSERT_EQ(ibv_query_qp(p.a, &a, IBV_QP_STATE, &ia), 0);
    EXPECT_EQ(a.qp_state, IBV_QPS_ERR);
  }
}

TEST(Atomics, ReadAndAtomicsNeedRdAtomicResources) {
  for (bool requester_side : {true, false}) {
    SCOPED_TRACE(requester_side ? "max_rd_atomic 0" : "max_dest_rd_atomic 0");
    Device dev;
    ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
    ibv_qp* a = create_rc_qp(dev.pd, cq);
    ibv_qp* b = create_rc_qp(dev.pd, cq);
    ASSERT_TRUE(a && b);
    ASSERT_EQ(to_init(a), 0);
    ASSERT_EQ(to_init(b), 0);
    ibv_qp_attr attr = valid_attr(dev.ctx, b->qp_num);
    attr.qp_state = IBV_QPS_RTR;
    const int rtr = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
    ASSERT_EQ(ibv_modify_qp(a, &attr, rtr), 0);
    attr.dest_qp_num = a->qp_num;
    attr.max_dest_rd_atomic = requester_side ? 1 : 0;
    ASSERT_EQ(ibv_modify_qp(b, &attr, rtr), 0);
    attr.qp_state = IBV_QPS_RTS;
    attr.max_rd_atomic = requester_side ? 0 : 1;
    const int rts = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                    IBV_QP_MAX_QP_RD_ATOMIC;
    ASSERT_EQ(ibv_modify_qp(a, &attr, rts), 0);
    Buffer target(dev.pd, 64, kAtomicAccess | IBV_ACCESS_REMOTE_READ), local(dev.pd, 64, kAtomicAccess);
    ibv_sge s = local.sge(0, 8);
    ibv_send_wr wr = atomic_wr(&s, IBV_WR_ATOMIC_FETCH_AND_ADD, target.addr(), target.mr->rkey, 1);
    ibv_send_wr* bad;
    ASSERT_EQ(ibv_post_send(a, &wr, &bad), 0);
    auto wc = poll_n(cq, 1);
    ASSERT_EQ(wc.size(), 1u);
    EXPECT_EQ(wc[0].status, requester_side ? IBV_WC_LOC_QP_OP_ERR : IBV_WC_REM_INV_REQ_ERR);
    EXPECT_EQ(*reinterpret_cast<uint64_t*>(target.bytes.data()), 0u);
    ibv_destroy_qp(a);
    ibv_destroy_qp(b);
    ibv_destroy_cq(cq);
  }
}

// Children in other processes hammer one counter with fetch-and-add; no
// increment may be lost, whichever way the counter's memory is reached.
TEST(Atomics, AtomicAcrossProcesses) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  constexpr int kChildren = 3, kAdds = 2000;
  for (bool shared_mapping : {false, true}) {
    // An anonymous MAP_SHARED buffer cannot be overlaid: peers reach it with
    // process_vm_readv/writev, under the host's atomic locks.
    SCOPED_TRACE(shared_mapping ? "cross-memory-attach path" : "overlay path");
    Device dev;
    void* mem = mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                     (shared_mapping ? MAP_SHARED : MAP_PRIVATE) | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(mem, MAP_FAILED);
    ibv_mr* mr = ibv_reg_mr(dev.pd, mem, 4096, kAtomicAccess);
    ASSERT_NE(mr, nullptr);
    auto* counter = static_cast<volatile uint64_t*>(mem);
    *counter = 0;
    ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
    int to_child[kChildren][2], to_parent[kChildren][2];
    pid_t pids[kChildren];
    ibv_qp* qps[kChildren];
    for (int i = 0; i < kChildren; ++i) {
      ASSERT_EQ(pipe(to_child[i]), 0);
      ASSERT_EQ(pipe(to_parent[i]), 0);
      ibv_qp_init_attr ia{};
      ia.qp_type = IBV_QPT_RC;
      ia.send_cq = ia.recv_cq = cq;
      ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
      ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
      qps[i] = ibv_create_qp(dev.pd, &ia);
      ASSERT_NE(qps[i], nullptr);
      pids[i] = fork();
      if (pids[i] == 0) {
        alarm(60);
        Device cdev;
        ibv_cq* ccq = ibv_create_cq(cdev.ctx, 16, nullptr, nullptr, 0);
        ia.send_cq = ia.recv_cq = ccq;  // the child's own objects
        ibv_qp* cqp = ibv_create_qp(cdev.pd, &ia);
        Buffer result(cdev.pd, 64, kAtomicAccess);
        uint32_t mine = cqp ? cqp->qp_num : 0, theirs = 0;
        if (write(to_parent[i][1], &mine, 4) != 4 || read(to_child[i][0], &theirs, 4) != 4) _exit(2);
        if (connect_qp(cqp, theirs)) _exit(3);
        ibv_sge s = result.sge(0, 8);
        for (int k = 0; k < kAdds; ++k) {
          ibv_send_wr wr = atomic_wr(&s, IBV_WR_ATOMIC_FETCH_AND_ADD, reinterpret_cast<uint64_t>(mem), mr->rkey, 1);
          ibv_send_wr* bad;
          if (ibv_post_send(cqp, &wr, &bad)) _exit(4);
          auto wc = poll_n(ccq, 1, 10000);
          if (wc.size() != 1 || wc[0].status != IBV_WC_SUCCESS) _exit(5);
        }
        _exit(0);
      }
      uint32_t theirs = 0;
      ASSERT_EQ(read(to_parent[i][0], &theirs, 4), 4);
      ASSERT_EQ(connect_qp(qps[i], theirs), 0);
      uint32_t mine = qps[i]->qp_num;
      ASSERT_EQ(write(to_child[i][1], &mine, 4), 4);
    }
    // The parent adds too, through its own QP connected to itself.
    QpPair self(dev, IBV_QPT_RC);
    Buffer result(dev.pd, 64, kAtomicAccess);
    ibv_mr* mr2 = mr;
    ibv_sge s = result.sge(0, 8);
    for (int k = 0; k < kAdds; ++k) {
      ibv_send_wr wr = atomic_wr(&s, IBV_WR_ATOMIC_FETCH_AND_ADD, reinterpret_cast<uint64_t>(mem), mr2->rkey, 1);
      ASSERT_EQ(run(self, wr), IBV_WC_SUCCESS);
    }
    for (int i = 0; i < kChildren; ++i) {
      int status = 0;
      ASSERT_EQ(waitpid(pids[i], &status, 0), pids[i]);
      EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child " << i << " status " << status;
      ibv_destroy_qp(qps[i]);
      for (int fd : {to_child[i][0], to_child[i][1], to_parent[i][0], to_parent[i][1]}) close(fd);
    }
    EXPECT_EQ(*counter, static_cast<uint64_t>((kChildren + 1) * kAdds));
    ibv_destroy_cq(cq);
    ibv_dereg_mr(mr);
    munmap(mem, 4096);
  }
}
