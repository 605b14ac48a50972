// One process at a NIC's scale (issue 39): 65535 MRs, 65536 connected QPs
// on one CQ. These check that everything still works at that size; what
// each call costs as the objects grow is bench/object_costs.sh's to
// measure, not a test's. (Suites named Scale* carry the label `scale`.)
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <vector>

#include "verbs_fixture.h"

namespace svtest {
namespace {

constexpr size_t kPage = 4096;

// Registration charges RLIMIT_MEMLOCK as the kernel does: raised as far as
// this process may. False when it still falls short of `bytes` (the
// registrations then fail with ENOMEM unless the process has CAP_IPC_LOCK).
bool memlock_allows(uint64_t bytes) {
  rlimit lim{};
  if (getrlimit(RLIMIT_MEMLOCK, &lim) != 0) return false;
  if (lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= bytes) return true;
  rlimit want{RLIM_INFINITY, RLIM_INFINITY};
  if (setrlimit(RLIMIT_MEMLOCK, &want) == 0) return true;  // (root)
  want = {lim.rlim_max, lim.rlim_max};
  setrlimit(RLIMIT_MEMLOCK, &want);
  return lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= bytes;
}

// A WRITE of `text` (inline: every MR index is taken) to `addr` under `rkey`,
// waited for.
ibv_wc_status write_inline(QpPair& pair, uint64_t addr, uint32_t rkey, const char* text) {
  ibv_sge sge{reinterpret_cast<uint64_t>(text), static_cast<uint32_t>(std::strlen(text)), 0};
  ibv_send_wr wr = write_wr(&sge, 1, addr, rkey, IBV_SEND_SIGNALED | IBV_SEND_INLINE);
  return post_and_wait(pair.a, pair.cq_a, wr);
}

// Every MR index a process has, each an MR of one page of one mapping (so
// the overlay map holds 65535 extents side by side); the keys work for the
// first, the middle and the last, while all are live and after the others
// went; all deregister.
TEST(ScaleRegistration, SixtyFiveThousandMrsOf4KiB) {
  Device dev;
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(dev.ctx, &da), 0);
  const size_t n = std::min<size_t>(65535, static_cast<size_t>(da.max_mr));
  const bool limit_ok = memlock_allows(n * kPage);
  QpPair pair(dev, IBV_QPT_RC);
  void* mem = mmap(nullptr, n * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mem, MAP_FAILED);
  auto* bytes = static_cast<uint8_t*>(mem);
  std::vector<ibv_mr*> mrs(n);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  for (size_t i = 0; i < n; ++i) {
    bytes[i * kPage] = static_cast<uint8_t>(i);
    mrs[i] = ibv_reg_mr(dev.pd, bytes + i * kPage, kPage, access);
    if (!mrs[i] && errno == ENOMEM && !limit_ok && i > 0) {
      for (size_t j = 0; j < i; ++j) ibv_dereg_mr(mrs[j]);
      munmap(mem, n * kPage);
      GTEST_SKIP() << "RLIMIT_MEMLOCK holds " << i << " registrations of 4 KiB, not " << n
                   << " (raise `ulimit -l`, or SOFTVERBS_MEMLOCK=ignore)";
    }
    ASSERT_NE(mrs[i], nullptr) << "registration " << i << ": " << std::strerror(errno);
  }
  std::set<uint32_t> keys;
  for (ibv_mr* mr : mrs) keys.insert(mr->rkey);
  EXPECT_EQ(keys.size(), n) << "every key its own";
  for (size_t i : {size_t{0}, n / 2, n - 1}) {
    ASSERT_EQ(write_inline(pair, reinterpret_cast<uint64_t>(bytes + i * kPage + 8), mrs[i]->rkey, "landed"),
              IBV_WC_SUCCESS)
        << "MR " << i;
    EXPECT_EQ(std::memcmp(bytes + i * kPage + 8, "landed", 6), 0) << "MR " << i;
    EXPECT_EQ(bytes[i * kPage], static_cast<uint8_t>(i)) << "the page kept its bytes";
  }
  for (size_t i = 0; i + 1 < n; ++i) ASSERT_EQ(ibv_dereg_mr(mrs[i]), 0) << i;
  // The last one, registered when all the others were there, outlives them.
  ASSERT_EQ(write_inline(pair, reinterpret_cast<uint64_t>(bytes + (n - 1) * kPage + 64), mrs[n - 1]->rkey, "late"),
            IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(bytes + (n - 1) * kPage + 64, "late", 4), 0);
  // A deregistered key reaches nothing.
  EXPECT_EQ(write_inline(pair, reinterpret_cast<uint64_t>(bytes), mrs[0]->rkey, "x"), IBV_WC_REM_ACCESS_ERR);
  ASSERT_EQ(ibv_dereg_mr(mrs[n - 1]), 0);
  munmap(mem, n * kPage);
}

// Connects `qp` to `dest` with attributes worked out once (the fixture's
// connect_qp asks for the GID index at every step).
void connect(ibv_qp* qp, uint32_t dest, const ibv_qp_attr& base) {
  ibv_qp_attr a = base;
  a.qp_state = IBV_QPS_INIT;
  ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  a.qp_state = IBV_QPS_RTR;
  a.dest_qp_num = dest;
  ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
            0);
  a.qp_state = IBV_QPS_RTS;
  ASSERT_EQ(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                                      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC),
            0);
}

// 65536 RC QPs on one CQ, connected in pairs; some leave completions
// waiting in it (send completions in its private ring, receive completions
// in its shared ring). All but the last pair are destroyed before anything
// is polled: afterwards the CQ gives the survivors' completions, old and
// new, and not one of a destroyed QP (mlx5 cleans a destroyed QP's CQEs).
TEST(ScaleDestroy, SixtyFiveThousandConnectedQpsOnOneCq) {
  Device dev;
  ibv_device_attr da{};
  ASSERT_EQ(ibv_query_device(dev.ctx, &da), 0);
  const size_t n = std::min<size_t>(65536, static_cast<size_t>(da.max_qp)) & ~size_t{1};
  ibv_cq* cq = ibv_create_cq(dev.ctx, std::min(2 * static_cast<int>(n), da.max_cqe), nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  std::vector<uint8_t> target(kPage);
  ibv_mr* mr = ibv_reg_mr(dev.pd, target.data(), target.size(), IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
  ASSERT_NE(mr, nullptr);
  std::vector<ibv_qp*> qps(n);
  for (size_t i = 0; i < n; ++i) {
    qps[i] = create_rc_qp(dev.pd, cq, 2);
    ASSERT_NE(qps[i], nullptr) << "QP " << i << ": " << std::strerror(errno);
  }
  const ibv_qp_attr base = valid_attr(dev.ctx, 0);
  for (size_t i = 0; i < n; i += 2) {
    ASSERT_NO_FATAL_FAILURE(connect(qps[i], qps[i + 1]->qp_num, base));
    ASSERT_NO_FATAL_FAILURE(connect(qps[i + 1], qps[i]->qp_num, base));
  }
  // Every 64th pair, and the last: a WRITE from the first QP (its send
  // completion), a SEND from the second into a receive of the first (a send
  // and a receive completion). Within the host the initiator delivers as it
  // posts, so these wait in the CQ before the destroys begin.
  auto traffic = [&](size_t i, uint64_t tag) {
    ibv_sge rsge{reinterpret_cast<uint64_t>(target.data() + 64), 64, mr->lkey};
    ibv_recv_wr rwr{};
    rwr.wr_id = tag;
    rwr.sg_list = &rsge;
    rwr.num_sge = 1;
    ibv_recv_wr* bad_r;
    ASSERT_EQ(ibv_post_recv(qps[i], &rwr, &bad_r), 0);
    const char text[] = "scale";
    ibv_sge sge{reinterpret_cast<uint64_t>(text), sizeof text, 0};
    ibv_send_wr wr = write_wr(&sge, 1, reinterpret_cast<uint64_t>(target.data()), mr->rkey,
                              IBV_SEND_SIGNALED | IBV_SEND_INLINE, tag);
    ibv_send_wr* bad;
    ASSERT_EQ(ibv_post_send(qps[i], &wr, &bad), 0);
    wr.opcode = IBV_WR_SEND;
    ASSERT_EQ(ibv_post_send(qps[i + 1], &wr, &bad), 0);
  };
  for (size_t i = 0; i < n - 2; i += 128) ASSERT_NO_FATAL_FAILURE(traffic(i, i));
  ASSERT_NO_FATAL_FAILURE(traffic(n - 2, n - 2));
  usleep(20000);  // (should some of it have gone the long way)
  std::set<uint32_t> destroyed;
  for (size_t i = 0; i + 2 < n; ++i) {
    destroyed.insert(qps[i]->qp_num);
    ASSERT_EQ(ibv_destroy_qp(qps[i]), 0) << "QP " << i;
  }
  const std::set<uint32_t> survivors{qps[n - 2]->qp_num, qps[n - 1]->qp_num};
  ASSERT_NO_FATAL_FAILURE(traffic(n - 2, 1));
  std::vector<ibv_wc> got;
  for (int idle = 0; idle < 200;) {  // until nothing more comes for a while
    ibv_wc wc[64];
    int k = ibv_poll_cq(cq, 64, wc);
    ASSERT_GE(k, 0);
    got.insert(got.end(), wc, wc + k);
    idle = k ? 0 : idle + 1;
    if (!k) usleep(500);
  }
  size_t of_survivors = 0;
  for (const ibv_wc& wc : got) {
    ASSERT_EQ(destroyed.count(wc.qp_num), 0u) << "a completion of destroyed QP " << wc.qp_num << " (wr_id "
                                              << wc.wr_id << ")";
    ASSERT_EQ(survivors.count(wc.qp_num), 1u);
    EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
    ++of_survivors;
  }
  EXPECT_EQ(of_survivors, 6u) << "the last pair's three completions from before the destroys, three from after";
  ASSERT_EQ(ibv_destroy_qp(qps[n - 2]), 0);
  ASSERT_EQ(ibv_destroy_qp(qps[n - 1]), 0);
  ASSERT_EQ(ibv_dereg_mr(mr), 0);
  ASSERT_EQ(ibv_destroy_cq(cq), 0);
}

}  // namespace
}  // namespace svtest
