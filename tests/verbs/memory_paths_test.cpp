// How a peer reaches registered memory that cannot be overlaid (an
// anonymous MAP_SHARED mapping here) when process_vm_readv/writev are denied
// to it, as a container's seccomp profile does: the owner's bounce service
// copies instead, and every operation still works and moves the right bytes.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstring>

#include "sanitizers.h"
#include "verbs_fixture.h"

using namespace svtest;

namespace {

constexpr size_t kRegion = 4u << 20;      // more than one bounce request (1 MiB each)
constexpr size_t kWriteAt = 4096, kWriteLen = (2u << 20) + 123;
constexpr size_t kReadAt = 3u << 20, kReadLen = 300000;
constexpr size_t kAtomicAt = 64;
constexpr size_t kRecvAt = kRegion - 8192;
constexpr uint32_t kSendLen = 5000;
constexpr int kAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                        IBV_ACCESS_REMOTE_ATOMIC;

uint8_t pattern(size_t i, uint8_t seed) { return static_cast<uint8_t>(i * 131 + seed + (i >> 12)); }

// process_vm_readv/writev fail with EPERM from now on, in this process.
bool deny_cross_memory_attach() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_readv, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_process_vm_writev, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
  };
  sock_fprog prog{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) != 0) return false;
  char byte;
  iovec local{&byte, 1}, remote{&byte, 1};
  return process_vm_readv(getppid(), &local, 1, &remote, 1, 0) < 0 && errno == EPERM;
}

// The child: denied process_vm_*, it writes, reads, adds and sends to the
// parent's shared mapping. Returns its exit code (0: all as expected).
int requester(uint8_t* region, uint32_t rkey, int from_parent, int to_parent) {
  if (!deny_cross_memory_attach()) return 10;
  Device dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ibv_qp* qp = cq ? create_rc_qp(dev.pd, cq) : nullptr;
  if (!qp) return 11;
  uint32_t mine = qp->qp_num, theirs = 0;
  if (write(to_parent, &mine, 4) != 4 || read(from_parent, &theirs, 4) != 4) return 12;
  if (connect_qp(qp, theirs)) return 13;
  std::vector<uint8_t> local(kWriteLen + kReadLen + 8 + kSendLen);
  ibv_mr* mr = ibv_reg_mr(dev.pd, local.data(), local.size(), kAccess);
  if (!mr) return 14;
  uint8_t* out = local.data();
  uint8_t* in = out + kWriteLen;
  uint8_t* old = in + kReadLen;
  uint8_t* msg = old + 8;
  for (size_t i = 0; i < kWriteLen; ++i) out[i] = pattern(i, 7);
  for (size_t i = 0; i < kSendLen; ++i) msg[i] = pattern(i, 99);
  const uint64_t base = reinterpret_cast<uint64_t>(region);
  auto run = [&](ibv_wr_opcode op, uint8_t* buf, uint32_t len, uint64_t remote) {
    ibv_sge sge{reinterpret_cast<uint64_t>(buf), len, mr->lkey};
    ibv_send_wr wr{};
    wr.opcode = op;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote;
    wr.wr.rdma.rkey = rkey;
    if (op == IBV_WR_ATOMIC_FETCH_AND_ADD) {
      wr.wr.atomic.remote_addr = remote;
      wr.wr.atomic.rkey = rkey;
      wr.wr.atomic.compare_add = 5;
    }
    return post_and_wait(qp, cq, wr);
  };
  if (run(IBV_WR_RDMA_WRITE, out, kWriteLen, base + kWriteAt) != IBV_WC_SUCCESS) return 20;
  if (run(IBV_WR_RDMA_READ, in, kReadLen, base + kReadAt) != IBV_WC_SUCCESS) return 21;
  for (size_t i = 0; i < kReadLen; ++i)
    if (in[i] != pattern(kReadAt + i, 1)) return 22;
  if (run(IBV_WR_ATOMIC_FETCH_AND_ADD, old, 8, base + kAtomicAt) != IBV_WC_SUCCESS) return 23;
  uint64_t was;
  std::memcpy(&was, old, 8);
  if (was != 1000) return 24;
  if (run(IBV_WR_SEND, msg, kSendLen, 0) != IBV_WC_SUCCESS) return 25;
  // Out of bounds is refused as on any path: remote access error.
  if (run(IBV_WR_RDMA_WRITE, out, 4096, base + kRegion - 100) != IBV_WC_REM_ACCESS_ERR) return 26;
  return 0;
}

}  // namespace

TEST(MemoryPaths, PeerDeniedCrossMemoryAttachGoesThroughTheBounceService) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  Device dev;
  // An anonymous shared mapping cannot be overlaid: peers need process_vm_*
  // or, denied those, our bounce service.
  auto* region = static_cast<uint8_t*>(
      mmap(nullptr, kRegion, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(region, MAP_FAILED);
  for (size_t i = 0; i < kRegion; ++i) region[i] = pattern(i, 1);
  uint64_t counter = 1000;
  std::memcpy(region + kAtomicAt, &counter, 8);
  ibv_mr* mr = ibv_reg_mr(dev.pd, region, kRegion, kAccess);
  ASSERT_NE(mr, nullptr);
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ibv_qp* qp = create_rc_qp(dev.pd, cq);
  ASSERT_NE(qp, nullptr);

  int down[2], up[2];
  ASSERT_EQ(pipe(down), 0);
  ASSERT_EQ(pipe(up), 0);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(60);
    _exit(requester(region, mr->rkey, down[0], up[1]));
  }
  uint32_t theirs = 0, mine = qp->qp_num;
  ASSERT_EQ(read(up[0], &theirs, 4), 4);
  ASSERT_EQ(connect_qp(qp, theirs), 0);
  ibv_sge rsge{reinterpret_cast<uint64_t>(region + kRecvAt), 8192, mr->lkey};
  ibv_recv_wr rwr{};
  rwr.wr_id = 77;
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad;
  ASSERT_EQ(ibv_post_recv(qp, &rwr, &rbad), 0);
  ASSERT_EQ(write(down[1], &mine, 4), 4);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status)) << status;
  ASSERT_EQ(WEXITSTATUS(status), 0) << "requester step failed (see requester())";

  for (size_t i = 0; i < kWriteLen; ++i)
    ASSERT_EQ(region[kWriteAt + i], pattern(i, 7)) << "RDMA WRITE byte " << i;
  ASSERT_EQ(region[kWriteAt - 1], pattern(kWriteAt - 1, 1));
  ASSERT_EQ(region[kWriteAt + kWriteLen], pattern(kWriteAt + kWriteLen, 1));
  std::memcpy(&counter, region + kAtomicAt, 8);
  EXPECT_EQ(counter, 1005u);
  auto wc = poll_n(cq, 1);
  ASSERT_GE(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 77u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].byte_len, kSendLen);
  for (size_t i = 0; i < kSendLen; ++i) ASSERT_EQ(region[kRecvAt + i], pattern(i, 99)) << "SEND byte " << i;
  // The refused WRITE moved the parent's QP to the error state too (remote
  // access error), and its bytes never landed.
  EXPECT_EQ(region[kRegion - 100], pattern(kRegion - 100, 1));

  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
  ibv_dereg_mr(mr);
  munmap(region, kRegion);
  for (int fd : {down[0], down[1], up[0], up[1]}) close(fd);
}
