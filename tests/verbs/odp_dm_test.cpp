// On-demand paging MRs (explicit and implicit), ibv_advise_mr, and device
// memory (ibv_alloc_dm, ibv_memcpy_to/from_dm, ibv_reg_dm_mr), as their man
// pages describe them.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "sanitizers.h"
#include "verbs_fixture.h"
#include "verbs_test_util.h"

using namespace svtest;
using namespace svtest::util;

namespace {

constexpr int kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                     IBV_ACCESS_REMOTE_ATOMIC;
constexpr size_t kPage = 4096;

ibv_send_wr rdma_wr(ibv_sge* sg, ibv_wr_opcode op, uint64_t remote, uint32_t rkey) {
  ibv_send_wr wr = make_wr(1, sg, 1, op);
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  return wr;
}

// An address range reserved with nothing mapped in it.
struct Hole {
  uint8_t* at;
  size_t len;
  explicit Hole(size_t n) : len(n) {
    // Reserved, not accessible: a range left unmapped could be taken by
    // the next mmap (ours included) before the test maps it.
    at = static_cast<uint8_t*>(mmap(nullptr, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  }
  void map() {
    void* p = mmap(at, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    ASSERT_EQ(p, at);
  }
  ~Hole() { munmap(at, len); }
};

}  // namespace

TEST(Odp, DeviceAdvertisesOnDemandPagingAndDeviceMemory) {
  Device dev;
  ibv_device_attr_ex a{};
  ASSERT_EQ(ibv_query_device_ex(dev.ctx, nullptr, &a), 0);
  EXPECT_TRUE(a.odp_caps.general_caps & IBV_ODP_SUPPORT);
  EXPECT_TRUE(a.odp_caps.general_caps & IBV_ODP_SUPPORT_IMPLICIT);
  const uint32_t rc = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV | IBV_ODP_SUPPORT_WRITE |
                      IBV_ODP_SUPPORT_READ | IBV_ODP_SUPPORT_ATOMIC | IBV_ODP_SUPPORT_SRQ_RECV;
  EXPECT_EQ(a.odp_caps.per_transport_caps.rc_odp_caps & rc, rc);
  EXPECT_EQ(a.xrc_odp_caps & rc, rc);
  EXPECT_GT(a.max_dm_size, 0u);
}

// An ODP MR may cover memory that is not mapped yet: registration neither
// checks nor pins it, and the MR sees whatever is mapped when it is used.
TEST(Odp, ExplicitMrFollowsMappingsMadeAfterRegistration) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  Hole hole(4 * kPage);
  ibv_mr* odp = ibv_reg_mr(dev.pd, hole.at, hole.len, kAll | IBV_ACCESS_ON_DEMAND);
  ASSERT_NE(odp, nullptr) << strerror(errno);
  Buffer src(dev.pd, kPage);
  fill_pattern(src.bytes.data(), kPage, 5);

  // Nothing mapped yet: the access fails as a page fault a NIC cannot
  // resolve does (remote access error), and the process lives on.
  ibv_sge s = src.sge(0, 1000);
  ibv_send_wr wr = rdma_wr(&s, IBV_WR_RDMA_WRITE, reinterpret_cast<uint64_t>(hole.at) + 100, odp->rkey);
  EXPECT_EQ(post_and_wait(p.a, p.cq_a, wr), IBV_WC_REM_ACCESS_ERR);

  // Mapped later, through a new connection: the bytes land.
  hole.map();
  QpPair q(dev, IBV_QPT_RC);
  EXPECT_EQ(post_and_wait(q.a, q.cq_a, wr), IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(hole.at + 100, 1000, 5));
  EXPECT_EQ(ibv_dereg_mr(odp), 0);
}

// An on-demand MR reaches pages as the application maps them now, as an
// mlx5 device faults them in: a page made read-only takes no remote write,
// while a remote read of it still works.
TEST(Odp, ReadOnlyPageTakesNoRemoteWrite) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  Hole hole(kPage);
  hole.map();
  fill_pattern(hole.at, kPage, 7);
  ASSERT_EQ(mprotect(hole.at, kPage, PROT_READ), 0);
  ibv_mr* odp = ibv_reg_mr(dev.pd, hole.at, hole.len, kAll | IBV_ACCESS_ON_DEMAND);
  ASSERT_NE(odp, nullptr) << strerror(errno);
  Buffer local(dev.pd, kPage);
  ibv_sge s = local.sge(0, 512);
  ibv_send_wr read = rdma_wr(&s, IBV_WR_RDMA_READ, reinterpret_cast<uint64_t>(hole.at), odp->rkey);
  EXPECT_EQ(post_and_wait(p.a, p.cq_a, read), IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(local.bytes.data(), 512, 7));
  ibv_send_wr write = rdma_wr(&s, IBV_WR_RDMA_WRITE, reinterpret_cast<uint64_t>(hole.at), odp->rkey);
  EXPECT_EQ(post_and_wait(p.a, p.cq_a, write), IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(has_pattern(hole.at, kPage, 7)) << "the page kept its bytes";
  EXPECT_EQ(ibv_dereg_mr(odp), 0);
}

// Local on-demand memory that is not mapped fails the work request (local
// protection error) instead of faulting the process.
TEST(Odp, UnmappedLocalMemoryIsALocalProtectionError) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  Hole hole(2 * kPage);
  ibv_mr* odp = ibv_reg_mr(dev.pd, hole.at, hole.len, kAll | IBV_ACCESS_ON_DEMAND);
  ASSERT_NE(odp, nullptr);
  Buffer remote(dev.pd, kPage);
  ibv_sge s{reinterpret_cast<uint64_t>(hole.at), 512, odp->lkey};
  ibv_send_wr wr = rdma_wr(&s, IBV_WR_RDMA_WRITE, remote.addr(), remote.mr->rkey);
  EXPECT_EQ(post_and_wait(p.a, p.cq_a, wr), IBV_WC_LOC_PROT_ERR);
  QpPair q(dev, IBV_QPT_RC);
  wr = rdma_wr(&s, IBV_WR_RDMA_READ, remote.addr(), remote.mr->rkey);
  EXPECT_EQ(post_and_wait(q.a, q.cq_a, wr), IBV_WC_LOC_PROT_ERR);
  EXPECT_EQ(ibv_dereg_mr(odp), 0);
}

// The implicit ODP MR covers the whole address space: any buffer of the
// process can be sent from, read into and written to with its keys.
TEST(Odp, ImplicitMrCoversTheWholeAddressSpace) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  ibv_mr* all = ibv_reg_mr(dev.pd, nullptr, SIZE_MAX, kAll | IBV_ACCESS_ON_DEMAND);
  ASSERT_NE(all, nullptr) << strerror(errno);
  std::vector<uint8_t> a(8192), b(8192);
  fill_pattern(a.data(), a.size(), 9);
  ibv_sge s{reinterpret_cast<uint64_t>(a.data()), 3000, all->lkey};
  ibv_send_wr wr = rdma_wr(&s, IBV_WR_RDMA_WRITE, reinterpret_cast<uint64_t>(b.data()) + 7, all->rkey);
  ASSERT_EQ(post_and_wait(p.a, p.cq_a, wr), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(b.data() + 7, a.data(), 3000), 0);
  fill_pattern(b.data(), b.size(), 10);
  ibv_sge r{reinterpret_cast<uint64_t>(a.data()), 4000, all->lkey};
  wr = rdma_wr(&r, IBV_WR_RDMA_READ, reinterpret_cast<uint64_t>(b.data()) + 100, all->rkey);
  ASSERT_EQ(post_and_wait(p.a, p.cq_a, wr), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(a.data(), b.data() + 100, 4000), 0);
  // SEND and RECV through it as well.
  ibv_sge rs{reinterpret_cast<uint64_t>(b.data()), 8192, all->lkey};
  ASSERT_EQ(post_recv(p.b, 3, rs), 0);
  ibv_send_wr send = make_wr(2, &s, 1, IBV_WR_SEND);
  ASSERT_EQ(post_and_wait(p.a, p.cq_a, send), IBV_WC_SUCCESS);
  auto rc = wait_wc(p.cq_b, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(b.data(), a.data(), 3000), 0);
  EXPECT_EQ(ibv_dereg_mr(all), 0);
}

TEST(Odp, ImplicitMrNeedsOnDemandAccessAndItsOwnAddresses) {
  Device dev;
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(dev.pd, nullptr, SIZE_MAX, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_reg_mr_iova2(dev.pd, nullptr, SIZE_MAX, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND),
            nullptr);
  EXPECT_EQ(errno, EINVAL);
}

TEST(Odp, AdviseMrPrefetchesAndChecksItsArguments) {
  Device dev;
  const size_t n = 8 * kPage;
  auto* mem = static_cast<uint8_t*>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(mem, MAP_FAILED);
  ibv_mr* odp = ibv_reg_mr(dev.pd, mem, n, kAll | IBV_ACCESS_ON_DEMAND);
  ibv_mr* ro = ibv_reg_mr(dev.pd, mem, n, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_ON_DEMAND);
  Buffer plain(dev.pd, kPage);
  ASSERT_NE(odp, nullptr);
  ASSERT_NE(ro, nullptr);
  ibv_sge s{reinterpret_cast<uint64_t>(mem), static_cast<uint32_t>(n), odp->lkey};
  EXPECT_EQ(ibv_advise_mr(dev.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, IBV_ADVISE_MR_FLAG_FLUSH, &s, 1), 0);
  EXPECT_EQ(ibv_advise_mr(dev.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s, 1), 0);
  EXPECT_EQ(ibv_advise_mr(dev.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT, 0, &s, 1), 0);
  // The prefetch made the pages resident.
  unsigned char vec[8];
  ASSERT_EQ(mincore(mem, n, vec), 0);
  for (unsigned char v : vec) EXPECT_TRUE(v & 1);

  EXPECT_EQ(ibv_advise_mr(dev.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0x80, &s, 1), EINVAL);  // unknown flag
  EXPECT_EQ(ibv_advise_mr(dev.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s, 0), EINVAL);     // no SGE
  ibv_sge out = s;
  out.length += 1;  // past the MR
  EXPECT_EQ(ibv_advise_mr(dev.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &out, 1), EFAULT);
  ibv_sge bad = s;
  bad.lkey ^= 0x100;  // no such MR
  EXPECT_EQ(ibv_advise_mr(dev.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &bad, 1), EFAULT);
  ibv_sge readonly{s.addr, s.length, ro->lkey};
  EXPECT_EQ(ibv_advise_mr(dev.pd, IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE, 0, &readonly, 1), EFAULT);
  EXPECT_EQ(ibv_advise_mr(dev.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &readonly, 1), 0);
  ibv_sge pinned = plain.sge(0, 100);
  EXPECT_EQ(ibv_advise_mr(dev.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &pinned, 1), EINVAL);  // not on demand
  ibv_pd* other = ibv_alloc_pd(dev.ctx);
  EXPECT_EQ(ibv_advise_mr(other, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s, 1), EFAULT);  // another PD's key
  // A range that is not mapped cannot be faulted in.
  munmap(mem + 4 * kPage, kPage);
  EXPECT_EQ(ibv_advise_mr(dev.pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &s, 1), EFAULT);
  EXPECT_EQ(ibv_dereg_mr(odp), 0);
  EXPECT_EQ(ibv_dereg_mr(ro), 0);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
  munmap(mem, n);
}

// Another process writes into an ODP region mapped after registration.
TEST(Odp, PeerProcessReachesPagesMappedAfterRegistration) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  Device dev;
  Hole hole(2 * kPage);
  ibv_mr* odp = ibv_reg_mr(dev.pd, hole.at, hole.len, kAll | IBV_ACCESS_ON_DEMAND);
  ASSERT_NE(odp, nullptr);
  hole.map();
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ibv_qp* qp = create_rc_qp(dev.pd, cq);
  int down[2], up[2];
  ASSERT_EQ(pipe(down), 0);
  ASSERT_EQ(pipe(up), 0);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    Device cdev;
    ibv_cq* ccq = ibv_create_cq(cdev.ctx, 16, nullptr, nullptr, 0);
    ibv_qp* cqp = create_rc_qp(cdev.pd, ccq);
    Buffer src(cdev.pd, kPage);
    fill_pattern(src.bytes.data(), kPage, 21);
    uint32_t mine = cqp->qp_num, theirs = 0;
    if (write(up[1], &mine, 4) != 4 || read(down[0], &theirs, 4) != 4 || connect_qp(cqp, theirs)) _exit(2);
    ibv_sge s = src.sge(0, 2000);
    ibv_send_wr wr = rdma_wr(&s, IBV_WR_RDMA_WRITE, reinterpret_cast<uint64_t>(hole.at) + kPage - 1000, odp->rkey);
    _exit(post_and_wait(cqp, ccq, wr) == IBV_WC_SUCCESS ? 0 : 3);
  }
  uint32_t theirs = 0, mine = qp->qp_num;
  ASSERT_EQ(read(up[0], &theirs, 4), 4);
  ASSERT_EQ(connect_qp(qp, theirs), 0);
  ASSERT_EQ(write(down[1], &mine, 4), 4);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(has_pattern(hole.at + kPage - 1000, 2000, 21));
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dereg_mr(odp);
  for (int fd : {down[0], down[1], up[0], up[1]}) close(fd);
}

TEST(DeviceMemory, AllocCopyAndFreeFollowTheManPage) {
  Device dev;
  ibv_device_attr_ex a{};
  ASSERT_EQ(ibv_query_device_ex(dev.ctx, nullptr, &a), 0);
  ibv_alloc_dm_attr attr{};
  errno = 0;
  EXPECT_EQ(ibv_alloc_dm(dev.ctx, &attr), nullptr);  // length 0
  EXPECT_EQ(errno, EINVAL);
  attr.length = a.max_dm_size + 1;
  errno = 0;
  EXPECT_EQ(ibv_alloc_dm(dev.ctx, &attr), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  attr.length = 4096;
  attr.comp_mask = 1;  // nothing is defined there
  errno = 0;
  EXPECT_EQ(ibv_alloc_dm(dev.ctx, &attr), nullptr);
  EXPECT_EQ(errno, EINVAL);
  attr.comp_mask = 0;
  attr.log_align_req = 8;
  ibv_dm* dm = ibv_alloc_dm(dev.ctx, &attr);
  ASSERT_NE(dm, nullptr);
  uint8_t in[4096], out[4096] = {};
  fill_pattern(in, sizeof in, 3);
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 0, in, sizeof in), 0);
  EXPECT_EQ(ibv_memcpy_from_dm(out, dm, 0, sizeof out), 0);
  EXPECT_EQ(std::memcmp(in, out, sizeof in), 0);
  // Beyond the allocation: EFAULT; device memory is copied in aligned
  // 4-byte words, so an offset or length off that grain is EINVAL (mlx5).
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 4000, in, 100), EFAULT);
  EXPECT_EQ(ibv_memcpy_from_dm(out, dm, 4100, 4), EFAULT);
  EXPECT_EQ(ibv_memcpy_from_dm(out, dm, 0, 4100), EFAULT);
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 3, in, 4), EINVAL);
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 4, in, 3), EINVAL);
  EXPECT_EQ(ibv_memcpy_from_dm(out, dm, 2, 8), EINVAL);
  EXPECT_EQ(ibv_memcpy_from_dm(out, dm, 8, 6), EINVAL);
  EXPECT_EQ(ibv_memcpy_to_dm(dm, 4092, in, 4), 0);  // the last word
  EXPECT_EQ(ibv_memcpy_from_dm(out, dm, 16, 0), 0);
  EXPECT_EQ(ibv_free_dm(dm), 0);
}

// A DM MR is zero-based: work requests address it from 0, with its keys.
TEST(DeviceMemory, ZeroBasedMrCarriesRdmaAndSends) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  ibv_alloc_dm_attr attr{};
  attr.length = 16384;
  ibv_dm* dm = ibv_alloc_dm(dev.ctx, &attr);
  ASSERT_NE(dm, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_reg_dm_mr(dev.pd, dm, 0, 4096, kAll), nullptr);  // not zero-based
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_reg_dm_mr(dev.pd, dm, 16000, 4096, kAll | IBV_ACCESS_ZERO_BASED), nullptr);  // past the end
  EXPECT_EQ(errno, EINVAL);
  // Length 0 registers (as mlx5 does, and rdma-core's test_create_dm_mr
  // expects); the MR grants no byte.
  ibv_mr* empty = ibv_reg_dm_mr(dev.pd, dm, 0, 0, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED);
  ASSERT_NE(empty, nullptr) << strerror(errno);
  EXPECT_EQ(empty->length, 0u);
  ibv_mr* mr = ibv_reg_dm_mr(dev.pd, dm, 4096, 8192, kAll | IBV_ACCESS_ZERO_BASED);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_free_dm(dm), EBUSY);  // an MR still maps it

  Buffer src(dev.pd, 4096), back(dev.pd, 4096);
  fill_pattern(src.bytes.data(), 4096, 44);
  ibv_sge s = src.sge(0, 3000);
  ibv_send_wr wr = rdma_wr(&s, IBV_WR_RDMA_WRITE, 100, mr->rkey);  // offset 100 of the MR
  ASSERT_EQ(post_and_wait(p.a, p.cq_a, wr), IBV_WC_SUCCESS);
  uint8_t got[3000];
  ASSERT_EQ(ibv_memcpy_from_dm(got, dm, 4096 + 100, sizeof got), 0);
  EXPECT_EQ(std::memcmp(got, src.bytes.data(), sizeof got), 0);
  ibv_sge r = back.sge(0, 3000);
  wr = rdma_wr(&r, IBV_WR_RDMA_READ, 100, mr->rkey);
  ASSERT_EQ(post_and_wait(p.a, p.cq_a, wr), IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(back.bytes.data(), src.bytes.data(), 3000), 0);
  // The DM as a local buffer: send from it (addresses are offsets too).
  ibv_sge from_dm{100, 3000, mr->lkey};
  ibv_sge into = back.sge(0, 4096);
  std::memset(back.bytes.data(), 0, 4096);
  ASSERT_EQ(post_recv(p.b, 9, into), 0);
  ibv_send_wr send = make_wr(2, &from_dm, 1, IBV_WR_SEND);
  ASSERT_EQ(post_and_wait(p.a, p.cq_a, send), IBV_WC_SUCCESS);
  auto rc = wait_wc(p.cq_b, 1);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(std::memcmp(back.bytes.data(), src.bytes.data(), 3000), 0);
  // Out of the MR's bounds is a remote access error, as for any MR.
  QpPair q(dev, IBV_QPT_RC);
  wr = rdma_wr(&s, IBV_WR_RDMA_WRITE, 8192 - 100, mr->rkey);
  EXPECT_EQ(post_and_wait(q.a, q.cq_a, wr), IBV_WC_REM_ACCESS_ERR);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_free_dm(dm), EBUSY);  // the empty MR maps it too
  EXPECT_EQ(ibv_dereg_mr(empty), 0);
  EXPECT_EQ(ibv_free_dm(dm), 0);
}
