// Import and export (ibv_import_device, ibv_import_pd / _mr / _dm and their
// unimport calls), as the man pages describe them: a second context made
// from a dup of the first one's cmd_fd reaches its objects by handle, and
// QPs of either context use them.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "sanitizers.h"
#include "verbs_fixture.h"
#include "verbs_test_util.h"

using namespace svtest;
using namespace svtest::util;

namespace {

constexpr int kAll = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// A context imported from a dup of dev's cmd_fd, closed at the end.
struct Imported {
  ibv_context* ctx = nullptr;
  explicit Imported(Device& dev) { ctx = ibv_import_device(dup(dev.ctx->cmd_fd)); }
  ~Imported() {
    if (ctx) ibv_close_device(ctx);
  }
};

// An RC QP of `pd` on a new CQ of `ctx`.
struct Endpoint {
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  Endpoint(ibv_context* ctx, ibv_pd* pd) {
    cq = ibv_create_cq(ctx, 16, nullptr, nullptr, 0);
    qp = cq ? create_rc_qp(pd, cq) : nullptr;
  }
  ~Endpoint() {
    if (qp) ibv_destroy_qp(qp);
    if (cq) ibv_destroy_cq(cq);
  }
};

}  // namespace

TEST(Import, DeviceFromDupOfCmdFdIsAWorkingContext) {
  Device dev;
  Imported imp(dev);
  ASSERT_NE(imp.ctx, nullptr) << strerror(errno);
  EXPECT_NE(imp.ctx, dev.ctx);
  EXPECT_EQ(imp.ctx->device, dev.ctx->device);
  ibv_device_attr a{};
  EXPECT_EQ(ibv_query_device(imp.ctx, &a), 0);
  ibv_port_attr p{};
  EXPECT_EQ(ibv_query_port(imp.ctx, 1, &p), 0);
  EXPECT_EQ(p.state, IBV_PORT_ACTIVE);
}

TEST(Import, DeviceRefusesWhatIsNotAContextFd) {
  errno = 0;
  EXPECT_EQ(ibv_import_device(-1), nullptr);
  EXPECT_EQ(errno, EINVAL);  // as rdma-core: fstat fails
  int null_fd = open("/dev/null", O_RDWR);
  ASSERT_GE(null_fd, 0);
  errno = 0;
  EXPECT_EQ(ibv_import_device(null_fd), nullptr);
  EXPECT_EQ(errno, ENODEV);  // a file, but no device of ours
  close(null_fd);
}

TEST(Import, PdAndMrHaveTheOriginalsIdentity) {
  Device dev;
  Buffer buf(dev.pd, 4096);
  Imported imp(dev);
  ASSERT_NE(imp.ctx, nullptr);
  ibv_pd* pd = ibv_import_pd(imp.ctx, dev.pd->handle);
  ASSERT_NE(pd, nullptr) << strerror(errno);
  EXPECT_EQ(pd->context, imp.ctx);
  EXPECT_EQ(pd->handle, dev.pd->handle);
  ibv_mr* mr = ibv_import_mr(pd, buf.mr->handle);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  EXPECT_EQ(mr->context, imp.ctx);
  EXPECT_EQ(mr->pd, pd);
  EXPECT_EQ(mr->addr, buf.mr->addr);
  EXPECT_EQ(mr->length, buf.mr->length);
  EXPECT_EQ(mr->lkey, buf.mr->lkey);
  EXPECT_EQ(mr->rkey, buf.mr->rkey);
  EXPECT_EQ(mr->handle, buf.mr->handle);
  ibv_unimport_mr(mr);
  ibv_unimport_pd(pd);
}

TEST(Import, UnknownHandlesAndAnotherPdsMrAreRefused) {
  Device dev;
  Buffer buf(dev.pd, 4096);
  ibv_pd* other = ibv_alloc_pd(dev.ctx);
  ASSERT_NE(other, nullptr);
  errno = 0;
  EXPECT_EQ(ibv_import_pd(dev.ctx, 0xfffffff0u), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_import_mr(dev.pd, 0xfffffff0u), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_import_mr(other, buf.mr->handle), nullptr);
  EXPECT_EQ(errno, EINVAL);
  errno = 0;
  EXPECT_EQ(ibv_import_dm(dev.ctx, 0xfffffff0u), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_dealloc_pd(other), 0);
}

// The use case: the imported context builds QPs on the imported PD and
// moves data out of and into the original's MRs.
TEST(Import, QpsOfTheImportedContextUseTheOriginalsMemory) {
  Device dev;
  Buffer src(dev.pd, 4096, kAll);
  Buffer dst(dev.pd, 4096, kAll);
  fill_pattern(src.bytes.data(), 4096, 11);
  Imported imp(dev);
  ASSERT_NE(imp.ctx, nullptr);
  ibv_pd* pd = ibv_import_pd(imp.ctx, dev.pd->handle);
  ASSERT_NE(pd, nullptr);
  ibv_mr* src_mr = ibv_import_mr(pd, src.mr->handle);
  ASSERT_NE(src_mr, nullptr);
  {
    Endpoint mine(imp.ctx, pd);      // in the imported context
    Endpoint theirs(dev.ctx, dev.pd);  // in the original
    ASSERT_NE(mine.qp, nullptr);
    ASSERT_NE(theirs.qp, nullptr);
    ASSERT_EQ(connect_qp(mine.qp, theirs.qp->qp_num), 0);
    ASSERT_EQ(connect_qp(theirs.qp, mine.qp->qp_num), 0);

    // WRITE from the imported QP, gathering through the imported MR's lkey.
    ibv_sge s{reinterpret_cast<uint64_t>(src_mr->addr), 4096, src_mr->lkey};
    ibv_send_wr wr = make_wr(1, &s, 1, IBV_WR_RDMA_WRITE);
    wr.wr.rdma.remote_addr = dst.addr();
    wr.wr.rdma.rkey = dst.mr->rkey;
    ASSERT_EQ(post_and_wait(mine.qp, mine.cq, wr), IBV_WC_SUCCESS);
    EXPECT_EQ(std::memcmp(src.bytes.data(), dst.bytes.data(), 4096), 0);

    // The PD is in use through either struct: neither can deallocate it.
    EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
    EXPECT_EQ(ibv_dealloc_pd(dev.pd), EBUSY);
  }
  ibv_unimport_mr(src_mr);
  ibv_unimport_pd(pd);
}

// Destroying through the import destroys the object (as the kernel's), so
// the original's key stops working and its own destroy says EINVAL.
TEST(Import, DeregisteringTheImportDeregistersTheMr) {
  Device dev;
  Buffer target(dev.pd, 4096, kAll);
  Buffer src(dev.pd, 64, kAll);
  ibv_mr* extra = ibv_reg_mr(dev.pd, target.bytes.data(), 4096, kAll);
  ASSERT_NE(extra, nullptr);
  Imported imp(dev);
  ASSERT_NE(imp.ctx, nullptr);
  ibv_pd* pd = ibv_import_pd(imp.ctx, dev.pd->handle);
  ASSERT_NE(pd, nullptr);
  ibv_mr* mr = ibv_import_mr(pd, extra->handle);
  ASSERT_NE(mr, nullptr);
  const uint32_t rkey = extra->rkey;
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dereg_mr(extra), EINVAL);  // already gone (the struct stays the application's)
  errno = 0;
  EXPECT_EQ(ibv_import_mr(pd, extra->handle), nullptr);
  EXPECT_EQ(errno, EINVAL);

  QpPair p(dev, IBV_QPT_RC);
  ibv_sge s = src.sge(0, 64);
  ibv_send_wr wr = make_wr(1, &s, 1, IBV_WR_RDMA_WRITE);
  wr.wr.rdma.remote_addr = target.addr();
  wr.wr.rdma.rkey = rkey;
  EXPECT_EQ(post_and_wait(p.a, p.cq_a, wr), IBV_WC_REM_ACCESS_ERR);
  ibv_unimport_pd(pd);
}

TEST(Import, DeallocatingTheImportedPdDeallocatesThePd) {
  Device dev;
  ibv_pd* orig = ibv_alloc_pd(dev.ctx);
  ASSERT_NE(orig, nullptr);
  Imported imp(dev);
  ASSERT_NE(imp.ctx, nullptr);
  ibv_pd* pd = ibv_import_pd(imp.ctx, orig->handle);
  ASSERT_NE(pd, nullptr);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_pd(dev.ctx, orig->handle), nullptr);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(ibv_dealloc_pd(orig), EINVAL);
}

TEST(Import, DeviceMemoryIsSharedAndMapsThroughAnImportedPd) {
  Device dev;
  ibv_alloc_dm_attr attr{};
  attr.length = 4096;
  ibv_dm* dm = ibv_alloc_dm(dev.ctx, &attr);
  ASSERT_NE(dm, nullptr) << strerror(errno);
  Imported imp(dev);
  ASSERT_NE(imp.ctx, nullptr);
  ibv_dm* idm = ibv_import_dm(imp.ctx, dm->handle);
  ASSERT_NE(idm, nullptr) << strerror(errno);
  EXPECT_EQ(idm->context, imp.ctx);
  EXPECT_EQ(idm->handle, dm->handle);

  uint8_t in[256], out[256] = {};
  fill_pattern(in, sizeof in, 3);
  ASSERT_EQ(ibv_memcpy_to_dm(idm, 128, in, sizeof in), 0);
  ASSERT_EQ(ibv_memcpy_from_dm(out, dm, 128, sizeof out), 0);
  EXPECT_EQ(std::memcmp(in, out, sizeof in), 0);

  // An MR over the DM through the imported PD and DM keeps the DM alive
  // for either struct.
  ibv_pd* pd = ibv_import_pd(imp.ctx, dev.pd->handle);
  ASSERT_NE(pd, nullptr);
  ibv_mr* mr = ibv_reg_dm_mr(pd, idm, 0, 4096, kAll | IBV_ACCESS_ZERO_BASED);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_free_dm(dm), EBUSY);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);

  ibv_unimport_dm(idm);
  ibv_unimport_pd(pd);
  const uint32_t handle = dm->handle;
  EXPECT_EQ(ibv_free_dm(dm), 0);
  errno = 0;
  EXPECT_EQ(ibv_import_dm(imp.ctx, handle), nullptr);
  EXPECT_EQ(errno, EINVAL);
}

// A cmd_fd passed to another process names objects in the sender's address
// space: not supported yet, and said so.
TEST(Import, AnotherProcessesCmdFdIsNotSupported) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  Device dev;
  int fd = dup(dev.ctx->cmd_fd);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    errno = 0;
    ibv_context* c = ibv_import_device(fd);
    _exit(c == nullptr && errno == EOPNOTSUPP ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(fd);
}
