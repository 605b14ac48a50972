// Memory registration: access-flag and address checks, keys, iova-based
// registration, re-registration, PD lifetime, and - because softverbs
// remaps the pages of registered memory - that the application's memory
// keeps its content and behaviour before, during and after registration.
#include <gtest/gtest.h>

#include <thread>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "sanitizers.h"
#include "verbs_fixture.h"
#include "verbs_test_util.h"

using namespace svtest;
using namespace svtest::util;

namespace {

constexpr size_t kPage = 4096;
constexpr unsigned kAllRemote =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// Sends [addr, addr+len) (lkey) from p.a to p.b and returns what b received.
// Empty on failure (a test failure is recorded).
std::vector<uint8_t> send_through(QpPair& p, uint64_t addr, uint32_t len, uint32_t lkey) {
  Buffer dst(p.dev.pd, len + kGrh);
  ibv_sge rs = dst.sge(0, len + kGrh);
  EXPECT_EQ(post_recv(p.b, 1, rs), 0);
  ibv_sge ss{addr, len, lkey};
  EXPECT_EQ(send_a_to_b(p, 2, &ss, 1), 0);
  auto s = wait_wc(p.cq_a, 1, 1000);
  auto r = wait_wc(p.cq_b, 1, 1000);
  if (s.size() != 1 || s[0].status != IBV_WC_SUCCESS) {
    ADD_FAILURE() << "send completion: " << (s.empty() ? "none" : ibv_wc_status_str(s[0].status));
    return {};
  }
  if (r.size() != 1 || r[0].status != IBV_WC_SUCCESS) {
    ADD_FAILURE() << "receive completion: " << (r.empty() ? "none" : ibv_wc_status_str(r[0].status));
    return {};
  }
  size_t skip = p.type == IBV_QPT_UD ? kGrh : 0;
  return std::vector<uint8_t>(dst.bytes.begin() + skip, dst.bytes.begin() + skip + len);
}

// RDMA WRITE of `len` bytes of `seed` pattern from p.a into (rkey, remote_addr).
ibv_wc_status rdma_write(QpPair& p, uint32_t rkey, uint64_t remote_addr, uint32_t len, uint32_t seed) {
  Buffer src(p.dev.pd, len);
  fill_pattern(src.bytes.data(), len, seed);
  ibv_sge ss = src.sge(0, len);
  ibv_send_wr wr = make_wr(3, &ss, 1, IBV_WR_RDMA_WRITE);
  wr.wr.rdma.remote_addr = remote_addr;
  wr.wr.rdma.rkey = rkey;
  EXPECT_EQ(post_send(p.a, &wr), 0);
  auto s = wait_wc(p.cq_a, 1, 1000);
  if (s.size() != 1) {
    ADD_FAILURE() << "no RDMA WRITE completion";
    return IBV_WC_GENERAL_ERR;
  }
  return s[0].status;
}

bool bytes_are(const uint8_t* p, size_t n, uint8_t v) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != v) return false;
  return true;
}

// ---------------------------------------------------------------- access flags

struct AccessCase {
  const char* name;
  unsigned access;
  int err;  // 0: must succeed
};

const AccessCase kAccessCases[] = {
    {"none", 0, 0},
    {"local_write", IBV_ACCESS_LOCAL_WRITE, 0},
    {"remote_read", IBV_ACCESS_REMOTE_READ, 0},
    {"remote_write_without_local_write", IBV_ACCESS_REMOTE_WRITE, EINVAL},
    {"remote_atomic_without_local_write", IBV_ACCESS_REMOTE_ATOMIC, EINVAL},
    {"remote_write_and_read_without_local_write", IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, EINVAL},
    {"remote_write_with_local_write", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 0},
    {"remote_atomic_with_local_write", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC, 0},
    {"all_classic", kAllRemote | IBV_ACCESS_REMOTE_ATOMIC, 0},
    {"on_demand", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ON_DEMAND, 0},
    {"on_demand_read_only", IBV_ACCESS_ON_DEMAND, 0},
    {"on_demand_remote_write_without_local_write", IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_ON_DEMAND, EINVAL},
    {"zero_based_outside_device_memory", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_ZERO_BASED, EOPNOTSUPP},
    {"unknown_bit_12", IBV_ACCESS_LOCAL_WRITE | (1u << 12), EINVAL},
    {"unknown_bit_15", 1u << 15, EINVAL},
    {"unknown_bit_19", IBV_ACCESS_LOCAL_WRITE | (1u << 19), EINVAL},
    {"relaxed_ordering", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING, 0},
    {"relaxed_ordering_remote", kAllRemote | IBV_ACCESS_RELAXED_ORDERING, 0},
    {"optional_bit_21", IBV_ACCESS_LOCAL_WRITE | (1u << 21), 0},
    {"optional_bit_29", IBV_ACCESS_REMOTE_READ | (1u << 29), 0},
};

TEST(MrAccess, FlagRules) {
  Device dev;
  std::vector<uint8_t> buf(2 * kPage);
  for (const AccessCase& c : kAccessCases) {
    SCOPED_TRACE(c.name);
    for (int entry = 0; entry < 2; ++entry) {
      SCOPED_TRACE(entry == 0 ? "ibv_reg_mr (function)" : "ibv_reg_mr_iova2");
      errno = 0;
      ibv_mr* mr = entry == 0 ? (ibv_reg_mr)(dev.pd, buf.data(), buf.size(), static_cast<int>(c.access))
                              : ibv_reg_mr_iova2(dev.pd, buf.data(), buf.size(),
                                                 reinterpret_cast<uintptr_t>(buf.data()), c.access);
      if (c.err == 0) {
        EXPECT_NE(mr, nullptr) << "errno " << errno << " (" << strerror(errno) << ")";
      } else {
        EXPECT_EQ(mr, nullptr);
        EXPECT_EQ(errno, c.err) << strerror(errno);
      }
      if (mr) {
        EXPECT_EQ(ibv_dereg_mr(mr), 0);
      }
    }
  }
}

TEST(MrArgs, ZeroLengthIsEinval) {
  Device dev;
  std::vector<uint8_t> buf(64);
  errno = 0;
  ibv_mr* mr = ibv_reg_mr(dev.pd, buf.data(), 0, IBV_ACCESS_LOCAL_WRITE);
  EXPECT_EQ(mr, nullptr);
  EXPECT_EQ(errno, EINVAL);
  if (mr) ibv_dereg_mr(mr);
}

// ---------------------------------------------------------------- address checks

struct UnmappedCase {
  const char* name;
  std::vector<int> unmap_pages;  // of a 3-page mapping
  unsigned access;
};

TEST(MrAddress, UnmappedMemoryIsEfault) {
  const UnmappedCase cases[] = {
      {"all_unmapped_local_write", {0, 1, 2}, IBV_ACCESS_LOCAL_WRITE},
      {"all_unmapped_read_only", {0, 1, 2}, 0},
      {"tail_unmapped", {2}, IBV_ACCESS_LOCAL_WRITE},
      {"head_unmapped", {0}, IBV_ACCESS_LOCAL_WRITE},
      {"hole_in_middle", {1}, IBV_ACCESS_LOCAL_WRITE},
      {"hole_in_middle_read_only", {1}, IBV_ACCESS_REMOTE_READ},
  };
  Device dev;
  for (const UnmappedCase& c : cases) {
    SCOPED_TRACE(c.name);
    void* m = mmap(nullptr, 3 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    auto* base = static_cast<uint8_t*>(m);
    std::memset(base, 1, 3 * kPage);
    for (int pg : c.unmap_pages) ASSERT_EQ(munmap(base + pg * kPage, kPage), 0);
    errno = 0;
    ibv_mr* mr = ibv_reg_mr(dev.pd, base, 3 * kPage, static_cast<int>(c.access));
    EXPECT_EQ(mr, nullptr);
    EXPECT_EQ(errno, EFAULT) << strerror(errno);
    if (mr) ibv_dereg_mr(mr);
    for (int pg = 0; pg < 3; ++pg)
      if (std::find(c.unmap_pages.begin(), c.unmap_pages.end(), pg) == c.unmap_pages.end())
        munmap(base + pg * kPage, kPage);
  }
}

struct ProtCase {
  const char* name;
  int prot;
  unsigned access;
  int err;
};

TEST(MrAddress, ReadOnlyMemoryRefusesWriteAccess) {
  const ProtCase cases[] = {
      {"ro_no_access", PROT_READ, 0, 0},
      {"ro_remote_read", PROT_READ, IBV_ACCESS_REMOTE_READ, 0},
      {"ro_local_write", PROT_READ, IBV_ACCESS_LOCAL_WRITE, EFAULT},
      {"ro_local_remote_write", PROT_READ, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, EFAULT},
      {"ro_local_write_remote_read", PROT_READ, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, EFAULT},
      {"ro_remote_atomic", PROT_READ, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC, EFAULT},
      {"prot_none_no_access", PROT_NONE, 0, EFAULT},
      {"rw_local_write", PROT_READ | PROT_WRITE, IBV_ACCESS_LOCAL_WRITE, 0},
  };
  Device dev;
  for (const ProtCase& c : cases) {
    SCOPED_TRACE(c.name);
    void* m = mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    fill_pattern(static_cast<uint8_t*>(m), 2 * kPage, 3);
    ASSERT_EQ(mprotect(m, 2 * kPage, c.prot), 0);
    errno = 0;
    ibv_mr* mr = ibv_reg_mr(dev.pd, m, 2 * kPage, static_cast<int>(c.access));
    if (c.err == 0) {
      EXPECT_NE(mr, nullptr) << strerror(errno);
    } else {
      EXPECT_EQ(mr, nullptr);
      EXPECT_EQ(errno, c.err) << strerror(errno);
    }
    if (mr) {
      if (c.prot & PROT_READ) {
        EXPECT_TRUE(has_pattern(static_cast<uint8_t*>(m), 2 * kPage, 3));
      }
      EXPECT_EQ(ibv_dereg_mr(mr), 0);
    }
    munmap(m, 2 * kPage);
  }
}

TEST(MrAddress, ReadOnlyMemoryCanBeSent) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  void* m = mmap(nullptr, 2 * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* base = static_cast<uint8_t*>(m);
  fill_pattern(base, 2 * kPage, 21);
  ASSERT_EQ(mprotect(m, 2 * kPage, PROT_READ), 0);
  ibv_mr* mr = ibv_reg_mr(dev.pd, m, 2 * kPage, IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  EXPECT_TRUE(has_pattern(base, 2 * kPage, 21)) << "registration changed read-only memory";
  auto got = send_through(p, reinterpret_cast<uint64_t>(base) + 100, 6000, mr->lkey);
  ASSERT_EQ(got.size(), 6000u);
  EXPECT_EQ(std::memcmp(got.data(), base + 100, 6000), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  munmap(m, 2 * kPage);
}

// ---------------------------------------------------------------- keys

TEST(MrKeys, NonZeroAndDistinct) {
  Device dev;
  std::vector<std::vector<uint8_t>> bufs(8, std::vector<uint8_t>(3000));
  std::vector<ibv_mr*> mrs;
  std::set<uint32_t> lkeys, rkeys;
  for (auto& b : bufs) {
    ibv_mr* mr = ibv_reg_mr(dev.pd, b.data(), b.size(), kAllRemote);
    ASSERT_NE(mr, nullptr);
    mrs.push_back(mr);
    EXPECT_NE(mr->lkey, 0u);
    EXPECT_NE(mr->rkey, 0u);
    EXPECT_EQ(mr->addr, b.data());
    EXPECT_EQ(mr->length, b.size());
    EXPECT_EQ(mr->pd, dev.pd);
    EXPECT_EQ(mr->context, dev.ctx);
    lkeys.insert(mr->lkey);
    rkeys.insert(mr->rkey);
  }
  // The same range registered again is another MR with other keys.
  ibv_mr* again = ibv_reg_mr(dev.pd, bufs[0].data(), bufs[0].size(), kAllRemote);
  ASSERT_NE(again, nullptr);
  mrs.push_back(again);
  lkeys.insert(again->lkey);
  rkeys.insert(again->rkey);
  EXPECT_EQ(lkeys.size(), mrs.size());
  EXPECT_EQ(rkeys.size(), mrs.size());
  for (ibv_mr* mr : mrs) EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

// ---------------------------------------------------------------- iova

using RegIova = ibv_mr* (*)(ibv_pd*, void*, size_t, uint64_t, unsigned);
ibv_mr* reg_iova(ibv_pd* pd, void* a, size_t n, uint64_t iova, unsigned acc) {
  return ibv_reg_mr_iova(pd, a, n, iova, acc);
}
ibv_mr* reg_iova2(ibv_pd* pd, void* a, size_t n, uint64_t iova, unsigned acc) {
  return ibv_reg_mr_iova2(pd, a, n, iova, acc);
}

class MrIova : public ::testing::TestWithParam<RegIova> {};

TEST_P(MrIova, SgeAndRemoteAddressesAreIovaBased) {
  constexpr uint64_t kSrcIova = 0x10000;      // far from any heap address
  constexpr uint64_t kDstIova = 0x7000000;
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  std::vector<uint8_t> src(8192), dst(8192, 0);
  fill_pattern(src.data(), src.size(), 5);
  ibv_mr* smr = GetParam()(dev.pd, src.data(), src.size(), kSrcIova, kAllRemote);
  ibv_mr* dmr = GetParam()(dev.pd, dst.data(), dst.size(), kDstIova, kAllRemote);
  ASSERT_NE(smr, nullptr) << strerror(errno);
  ASSERT_NE(dmr, nullptr) << strerror(errno);
  EXPECT_EQ(smr->addr, src.data());
  EXPECT_EQ(smr->length, src.size());

  // SEND from iova space of src into iova space of dst.
  ibv_sge rs{kDstIova + 50, 2000, dmr->lkey};
  ASSERT_EQ(post_recv(p.b, 1, rs), 0);
  ibv_sge ss{kSrcIova + 100, 1000, smr->lkey};
  ASSERT_EQ(send_a_to_b(p, 2, &ss, 1), 0);
  auto s = wait_wc(p.cq_a, 1, 1000), r = wait_wc(p.cq_b, 1, 1000);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(s[0].status);
  EXPECT_EQ(r[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(r[0].status);
  EXPECT_EQ(r[0].byte_len, 1000u);
  EXPECT_EQ(std::memcmp(dst.data() + 50, src.data() + 100, 1000), 0);
  EXPECT_TRUE(bytes_are(dst.data(), 50, 0));

  // RDMA WRITE and READ address the remote MR by iova too.
  ibv_sge ws{kSrcIova + 3000, 500, smr->lkey};
  ibv_send_wr w = make_wr(3, &ws, 1, IBV_WR_RDMA_WRITE);
  w.wr.rdma.remote_addr = kDstIova + 6000;
  w.wr.rdma.rkey = dmr->rkey;
  ASSERT_EQ(post_send(p.a, &w), 0);
  s = wait_wc(p.cq_a, 1, 1000);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(s[0].status);
  EXPECT_EQ(std::memcmp(dst.data() + 6000, src.data() + 3000, 500), 0);

  ibv_sge rd{kSrcIova + 7000, 100, smr->lkey};
  ibv_send_wr rw = make_wr(4, &rd, 1, IBV_WR_RDMA_READ);
  rw.wr.rdma.remote_addr = kDstIova + 50;
  rw.wr.rdma.rkey = dmr->rkey;
  ASSERT_EQ(post_send(p.a, &rw), 0);
  s = wait_wc(p.cq_a, 1, 1000);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(s[0].status);
  EXPECT_EQ(std::memcmp(src.data() + 7000, dst.data() + 50, 100), 0);

  EXPECT_EQ(ibv_dereg_mr(smr), 0);
  EXPECT_EQ(ibv_dereg_mr(dmr), 0);
}

TEST_P(MrIova, VirtualAddressOutsideIovaRangeIsProtectionError) {
  constexpr uint64_t kIova = 0x10000;
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  std::vector<uint8_t> src(4096, 7);
  ibv_mr* mr = GetParam()(dev.pd, src.data(), src.size(), kIova, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  Buffer dst(dev.pd, 4096);
  ASSERT_EQ(post_recv(p.b, 1, dst.sge(0, 4096)), 0);
  ibv_sge ss{reinterpret_cast<uint64_t>(src.data()), 100, mr->lkey};  // not an iova
  ASSERT_EQ(send_a_to_b(p, 2, &ss, 1), 0);
  auto s = wait_wc(p.cq_a, 1, 1000);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_LOC_PROT_ERR) << ibv_wc_status_str(s[0].status);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

INSTANTIATE_TEST_SUITE_P(Entry, MrIova, ::testing::Values(&reg_iova, &reg_iova2),
                         [](const auto& i) { return i.index == 0 ? std::string("reg_mr_iova") : "reg_mr_iova2"; });

// ---------------------------------------------------------------- rereg

TEST(MrRereg, ChangeAccess) {
  Device dev;
  QpPair before(dev, IBV_QPT_RC), after(dev, IBV_QPT_RC), revoked(dev, IBV_QPT_RC);
  std::vector<uint8_t> target(4096, 0);
  ibv_mr* mr = ibv_reg_mr(dev.pd, target.data(), target.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  uint64_t at = reinterpret_cast<uint64_t>(target.data()) + 100;
  // Without REMOTE_WRITE the write is refused (so the rereg below matters).
  EXPECT_EQ(rdma_write(before, mr->rkey, at, 1000, 9), IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(bytes_are(target.data(), target.size(), 0));

  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
            0);
  EXPECT_EQ(rdma_write(after, mr->rkey, at, 1000, 9), IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(target.data() + 100, 1000, 9));

  // Taking the right away again is enforced too.
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0, IBV_ACCESS_LOCAL_WRITE), 0);
  EXPECT_EQ(rdma_write(revoked, mr->rkey, at, 1000, 10), IBV_WC_REM_ACCESS_ERR);
  EXPECT_TRUE(has_pattern(target.data() + 100, 1000, 9));
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

TEST(MrRereg, ChangeTranslation) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  std::vector<uint8_t> b1(4096), b2(3 * 4096);
  fill_pattern(b1.data(), b1.size(), 1);
  fill_pattern(b2.data(), b2.size(), 2);
  ibv_mr* mr = ibv_reg_mr(dev.pd, b1.data(), b1.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, b2.data(), b2.size(), 0), 0);
  EXPECT_EQ(mr->addr, b2.data());
  EXPECT_EQ(mr->length, b2.size());
  auto got = send_through(p, reinterpret_cast<uint64_t>(b2.data()) + 4000, 5000, mr->lkey);
  ASSERT_EQ(got.size(), 5000u);
  EXPECT_EQ(std::memcmp(got.data(), b2.data() + 4000, 5000), 0);
  // The old buffer is ordinary memory again: intact and writable.
  EXPECT_TRUE(has_pattern(b1.data(), b1.size(), 1));
  fill_pattern(b1.data(), b1.size(), 4);
  EXPECT_TRUE(has_pattern(b1.data(), b1.size(), 4));
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

TEST(MrRereg, ChangePd) {
  Device dev;
  QpPair refused(dev, IBV_QPT_RC), p(dev, IBV_QPT_RC);
  ibv_pd* pd2 = ibv_alloc_pd(dev.ctx);
  ASSERT_NE(pd2, nullptr);
  std::vector<uint8_t> buf(4096);
  fill_pattern(buf.data(), buf.size(), 6);
  ibv_mr* mr = ibv_reg_mr(pd2, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  // An MR of another PD is not usable by the QPs of dev.pd.
  {
    Buffer dst(dev.pd, 4096);
    ASSERT_EQ(post_recv(refused.b, 1, dst.sge(0, 4096)), 0);
    ibv_sge ss{reinterpret_cast<uint64_t>(buf.data()), 100, mr->lkey};
    ASSERT_EQ(send_a_to_b(refused, 2, &ss, 1), 0);
    auto s = wait_wc(refused.cq_a, 1, 1000);
    ASSERT_EQ(s.size(), 1u);
    EXPECT_EQ(s[0].status, IBV_WC_LOC_PROT_ERR) << ibv_wc_status_str(s[0].status);
  }
  EXPECT_EQ(ibv_dealloc_pd(pd2), EBUSY);
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, dev.pd, nullptr, 0, 0), 0);
  EXPECT_EQ(mr->pd, dev.pd);
  auto got = send_through(p, reinterpret_cast<uint64_t>(buf.data()), 4096, mr->lkey);
  ASSERT_EQ(got.size(), 4096u);
  EXPECT_TRUE(has_pattern(got.data(), 4096, 6));
  EXPECT_EQ(ibv_dealloc_pd(pd2), 0) << "pd2 has no MR any more";
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

// The flows of rdma-core's test_mr_rereg_* (written against mlx5, which
// re-registers in place): the keys a program holds stay valid across
// ibv_rereg_mr; a receive WQE posted before the MR moved (or changed PD)
// names memory the MR no longer grants, so the incoming SEND fails (the
// receiver: local protection error; the sender: remote operation error);
// after both QPs are reset and brought back, the MR works with its keys.
namespace {

// a SENDs 64 bytes into the receive b had posted at (addr, lkey): the two
// completion statuses.
std::pair<ibv_wc_status, ibv_wc_status> send_into(QpPair& p, uint64_t addr, uint32_t lkey) {
  Buffer src(p.dev.pd, 64);
  fill_pattern(src.bytes.data(), 64, 77);
  ibv_sge rs{addr, 64, lkey};
  EXPECT_EQ(post_recv(p.b, 1, rs), 0);
  ibv_sge ss = src.sge(0, 64);
  EXPECT_EQ(send_a_to_b(p, 2, &ss, 1), 0);
  auto s = wait_wc(p.cq_a, 1, 2000), r = wait_wc(p.cq_b, 1, 2000);
  return {s.empty() ? IBV_WC_GENERAL_ERR : s[0].status, r.empty() ? IBV_WC_GENERAL_ERR : r[0].status};
}

}  // namespace

TEST(MrRereg, KeysStayAndAReceivePostedBeforeTheMoveFails) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  std::vector<uint8_t> b1(4096), b2(4096);
  ibv_mr* mr = ibv_reg_mr(dev.pd, b1.data(), b1.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  const uint32_t lkey = mr->lkey, rkey = mr->rkey;
  ibv_sge rs{reinterpret_cast<uint64_t>(b1.data()), 64, lkey};
  ASSERT_EQ(post_recv(p.b, 1, rs), 0);  // names b1
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr, b2.data(), b2.size(), 0), 0);
  EXPECT_EQ(mr->lkey, lkey);
  EXPECT_EQ(mr->rkey, rkey);
  Buffer src(dev.pd, 64);
  ibv_sge ss = src.sge(0, 64);
  ASSERT_EQ(send_a_to_b(p, 2, &ss, 1), 0);
  auto s = wait_wc(p.cq_a, 1, 2000), r = wait_wc(p.cq_b, 1, 2000);
  ASSERT_EQ(s.size(), 1u);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_REM_OP_ERR) << ibv_wc_status_str(s[0].status);
  EXPECT_EQ(r[0].status, IBV_WC_LOC_PROT_ERR) << ibv_wc_status_str(r[0].status);
  ASSERT_EQ(reset_and_reconnect(p), 0);
  auto [sent, received] = send_into(p, reinterpret_cast<uint64_t>(b2.data()), lkey);
  EXPECT_EQ(sent, IBV_WC_SUCCESS);
  EXPECT_EQ(received, IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(b2.data(), 64, 77));
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

TEST(MrRereg, ChangingPdAwayFromTheQpsFailsItsReceivesUntilChangedBack) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  ibv_pd* pd2 = ibv_alloc_pd(dev.ctx);
  std::vector<uint8_t> buf(4096);
  ibv_mr* mr = ibv_reg_mr(dev.pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  const uint32_t lkey = mr->lkey;
  const uint64_t at = reinterpret_cast<uint64_t>(buf.data());
  EXPECT_EQ(send_into(p, at, lkey), std::make_pair(IBV_WC_SUCCESS, IBV_WC_SUCCESS));
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, nullptr, 0, 0), 0);
  EXPECT_EQ(mr->lkey, lkey);
  EXPECT_EQ(send_into(p, at, lkey), std::make_pair(IBV_WC_REM_OP_ERR, IBV_WC_LOC_PROT_ERR));
  ASSERT_EQ(reset_and_reconnect(p), 0);
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, dev.pd, nullptr, 0, 0), 0);
  EXPECT_EQ(send_into(p, at, lkey), std::make_pair(IBV_WC_SUCCESS, IBV_WC_SUCCESS));
  // Re-registered into pd2 again, then pd2 cannot go while the MR is in it.
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_PD, pd2, nullptr, 0, 0), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd2), EBUSY);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
}

TEST(MrRereg, RemoteAccessGrantedLaterWorksWithTheRkeyHeldBefore) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  std::vector<uint8_t> target(4096, 0);
  ibv_mr* mr = ibv_reg_mr(dev.pd, target.data(), target.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  const uint32_t rkey = mr->rkey;  // handed to the peer before the rereg
  ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr, nullptr, 0,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE),
            0);
  EXPECT_EQ(rdma_write(p, rkey, reinterpret_cast<uint64_t>(target.data()), 512, 31), IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(target.data(), 512, 31));
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
}

TEST(MrPd, DeallocPdWithLiveMrIsEbusy) {
  Device dev;
  ibv_pd* pd = ibv_alloc_pd(dev.ctx);
  ASSERT_NE(pd, nullptr);
  std::vector<uint8_t> buf(100);
  ibv_mr* mr = ibv_reg_mr(pd, buf.data(), buf.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

// ---------------------------------------------------------------- the application's memory

// A registered sub-range of a heap buffer, with neighbours on the same page.
TEST(MrMemory, NeighbourBytesOnTheSamePageStayIntactAndWritable) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  constexpr size_t N = 3 * kPage, off = 1000, len = 100;
  auto* heap = static_cast<uint8_t*>(std::malloc(N));
  auto* small = static_cast<uint8_t*>(std::malloc(40));  // another heap object, likely nearby
  ASSERT_NE(heap, nullptr);
  ASSERT_NE(small, nullptr);
  fill_pattern(heap, N, 11);
  fill_pattern(small, 40, 12);
  ibv_mr* mr = ibv_reg_mr(dev.pd, heap + off, len, kAllRemote);
  ASSERT_NE(mr, nullptr);
  EXPECT_TRUE(has_pattern(heap, N, 11)) << "registration changed the buffer";
  EXPECT_TRUE(has_pattern(small, 40, 12)) << "registration changed a neighbouring heap object";

  volatile uint8_t* v = heap;
  v[off - 1] = 0xa1;
  v[off + len] = 0xb2;
  v[0] = 0xc3;
  v[N - 1] = 0xd4;
  small[0] = 0xe5;
  EXPECT_EQ(v[off - 1], 0xa1);
  EXPECT_EQ(v[off + len], 0xb2);

  // What the application writes is what the device sends...
  std::memset(heap + off, 0x5c, len);
  auto got = send_through(p, reinterpret_cast<uint64_t>(heap + off), len, mr->lkey);
  ASSERT_EQ(got.size(), len);
  EXPECT_TRUE(bytes_are(got.data(), len, 0x5c));
  // ...and what the device writes is what the application reads, without
  // touching the bytes around it.
  EXPECT_EQ(rdma_write(p, mr->rkey, reinterpret_cast<uint64_t>(heap + off), len, 13), IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(heap + off, len, 13));
  EXPECT_EQ(v[off - 1], 0xa1);
  EXPECT_EQ(v[off + len], 0xb2);
  EXPECT_EQ(v[0], 0xc3);
  EXPECT_EQ(v[N - 1], 0xd4);
  EXPECT_EQ(small[0], 0xe5);

  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_TRUE(has_pattern(heap + off, len, 13)) << "content lost at deregistration";
  EXPECT_EQ(v[off - 1], 0xa1);
  EXPECT_EQ(v[off + len], 0xb2);
  fill_pattern(heap, N, 14);
  EXPECT_TRUE(has_pattern(heap, N, 14));
  std::free(small);
  std::free(heap);
}

// The pages of an MR are there once it is registered, as the kernel's
// pinning makes them for a NIC (ib_umem_get), and data placed into them
// costs no page fault on the data path: an MPI ping-pong between two hosts
// ran its first ~4000 messages at twice its latency while UCX's receive
// ring faulted page by page.
size_t resident_pages(void* m, size_t pages) {
  std::vector<unsigned char> in(pages);
  EXPECT_EQ(mincore(m, pages * kPage, in.data()), 0) << strerror(errno);
  return static_cast<size_t>(std::count_if(in.begin(), in.end(), [](unsigned char c) { return c & 1; }));
}

long minor_faults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

TEST(MrMemory, PagesAreThereOnceRegistered) {
  Device dev;
  constexpr size_t kPages = 256;
  for (unsigned access : {kAllRemote, 0u}) {
    void* m = mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    ASSERT_NE(m, MAP_FAILED);
    ASSERT_EQ(resident_pages(m, kPages), 0u) << "fresh anonymous memory";
    ibv_mr* mr = ibv_reg_mr(dev.pd, m, kPages * kPage, static_cast<int>(access));
    ASSERT_NE(mr, nullptr) << strerror(errno);
    EXPECT_EQ(resident_pages(m, kPages), kPages) << "access " << access;
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    munmap(m, kPages * kPage);
  }
}

TEST(MrMemory, DataPlacedInAFreshMrCostsNoPageFaults) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  GTEST_SKIP() << "a sanitizer's shadow memory faults in as the data is placed";
#endif
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  constexpr size_t kPages = 256;
  void* m = mmap(nullptr, kPages * kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  ibv_mr* mr = ibv_reg_mr(dev.pd, m, kPages * kPage, kAllRemote);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  Buffer src(dev.pd, kPages * kPage);
  fill_pattern(src.bytes.data(), src.bytes.size(), 21);
  ibv_sge ss = src.sge(0, static_cast<uint32_t>(src.bytes.size()));
  ibv_send_wr wr = make_wr(4, &ss, 1, IBV_WR_RDMA_WRITE);
  wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(m);
  wr.wr.rdma.rkey = mr->rkey;
  const long before = minor_faults();
  ASSERT_EQ(post_send(p.a, &wr), 0);
  auto s = wait_wc(p.cq_a, 1, 5000);
  const long faults = minor_faults() - before;
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0].status, IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(static_cast<uint8_t*>(m), kPages * kPage, 21));
  // (A handful is the engine's own memory; faulting in the MR would be one
  // a page.)
  EXPECT_LT(faults, static_cast<long>(kPages / 8)) << "page faults while placing " << kPages << " pages";
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  munmap(m, kPages * kPage);
}

TEST(MrMemory, SubRangeOfALargerHeapBuffer) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  constexpr size_t N = 64 * 1024, off = 5000, len = 20000;
  auto* heap = static_cast<uint8_t*>(std::malloc(N));
  ASSERT_NE(heap, nullptr);
  fill_pattern(heap, N, 15);
  ibv_mr* mr = ibv_reg_mr(dev.pd, heap + off, len, kAllRemote);
  ASSERT_NE(mr, nullptr);
  EXPECT_TRUE(has_pattern(heap, N, 15));
  // Writes at both ends of the registered range land exactly there.
  EXPECT_EQ(rdma_write(p, mr->rkey, reinterpret_cast<uint64_t>(heap + off), 300, 16), IBV_WC_SUCCESS);
  EXPECT_EQ(rdma_write(p, mr->rkey, reinterpret_cast<uint64_t>(heap + off + len - 300), 300, 17), IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(heap + off, 300, 16));
  EXPECT_TRUE(has_pattern(heap + off + len - 300, 300, 17));
  std::vector<uint8_t> expect(N);
  fill_pattern(expect.data(), N, 15);
  EXPECT_EQ(std::memcmp(heap, expect.data(), off), 0) << "bytes before the MR changed";
  EXPECT_EQ(std::memcmp(heap + off + len, expect.data() + off + len, N - off - len), 0)
      << "bytes after the MR changed";
  EXPECT_EQ(std::memcmp(heap + off + 300, expect.data() + off + 300, len - 600), 0);
  // Application writes outside and inside the MR.
  fill_pattern(heap, off, 18);
  fill_pattern(heap + off + 1000, 2000, 19);
  auto got = send_through(p, reinterpret_cast<uint64_t>(heap + off + 1000), 2000, mr->lkey);
  ASSERT_EQ(got.size(), 2000u);
  EXPECT_TRUE(has_pattern(got.data(), 2000, 19));
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_TRUE(has_pattern(heap, off, 18));
  EXPECT_TRUE(has_pattern(heap + off, 300, 16));
  EXPECT_TRUE(has_pattern(heap + off + 1000, 2000, 19));
  std::free(heap);
}

TEST(MrMemory, SameRangeRegisteredTwice) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  constexpr size_t N = 4 * kPage, off = 700, len = 9000;
  auto* heap = static_cast<uint8_t*>(std::malloc(N));
  ASSERT_NE(heap, nullptr);
  fill_pattern(heap, N, 20);
  ibv_mr* m1 = ibv_reg_mr(dev.pd, heap + off, len, kAllRemote);
  ibv_mr* m2 = ibv_reg_mr(dev.pd, heap + off, len, kAllRemote);
  ASSERT_NE(m1, nullptr);
  ASSERT_NE(m2, nullptr);
  EXPECT_NE(m1->lkey, m2->lkey);
  EXPECT_TRUE(has_pattern(heap, N, 20));
  uint64_t a = reinterpret_cast<uint64_t>(heap + off);

  fill_pattern(heap + off, len, 21);
  auto g1 = send_through(p, a, len, m1->lkey);
  ASSERT_EQ(g1.size(), len);
  EXPECT_TRUE(has_pattern(g1.data(), len, 21));
  fill_pattern(heap + off, len, 22);
  auto g2 = send_through(p, a, len, m2->lkey);
  ASSERT_EQ(g2.size(), len);
  EXPECT_TRUE(has_pattern(g2.data(), len, 22));
  // A write through one MR is visible through the other and to the application.
  EXPECT_EQ(rdma_write(p, m1->rkey, a + 10, 500, 23), IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(heap + off + 10, 500, 23));
  auto g3 = send_through(p, a + 10, 500, m2->lkey);
  ASSERT_EQ(g3.size(), 500u);
  EXPECT_TRUE(has_pattern(g3.data(), 500, 23));

  EXPECT_EQ(ibv_dereg_mr(m1), 0);
  // The other registration still works.
  fill_pattern(heap + off, len, 24);
  auto g4 = send_through(p, a, len, m2->lkey);
  ASSERT_EQ(g4.size(), len);
  EXPECT_TRUE(has_pattern(g4.data(), len, 24));
  EXPECT_EQ(ibv_dereg_mr(m2), 0);
  EXPECT_TRUE(has_pattern(heap + off, len, 24));
  std::free(heap);
}

TEST(MrMemory, OverlappingRanges) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  constexpr size_t N = 6 * kPage;
  auto* heap = static_cast<uint8_t*>(std::malloc(N));
  ASSERT_NE(heap, nullptr);
  fill_pattern(heap, N, 30);
  struct R {
    size_t off, len;
  };
  const R ranges[] = {{100, 8192}, {6000, 14000}, {7000, 100}};  // partial overlap, and one inside both
  ibv_mr* mrs[3];
  for (int i = 0; i < 3; ++i) {
    mrs[i] = ibv_reg_mr(dev.pd, heap + ranges[i].off, ranges[i].len, kAllRemote);
    ASSERT_NE(mrs[i], nullptr) << "range " << i;
    EXPECT_TRUE(has_pattern(heap, N, 30)) << "registration " << i << " changed the buffer";
  }
  uint64_t base = reinterpret_cast<uint64_t>(heap);
  // A write through each MR into the common bytes is seen by the
  // application and through every other MR.
  for (int w = 0; w < 3; ++w) {
    SCOPED_TRACE(w);
    uint32_t seed = 31 + w;
    EXPECT_EQ(rdma_write(p, mrs[w]->rkey, base + 7000, 100, seed), IBV_WC_SUCCESS);
    EXPECT_TRUE(has_pattern(heap + 7000, 100, seed));
    for (int r = 0; r < 3; ++r) {
      auto got = send_through(p, base + 7000, 100, mrs[r]->lkey);
      ASSERT_EQ(got.size(), 100u);
      EXPECT_TRUE(has_pattern(got.data(), 100, seed)) << "read through MR " << r;
    }
  }
  // Deregistering in another order keeps the memory.
  EXPECT_EQ(ibv_dereg_mr(mrs[1]), 0);
  EXPECT_TRUE(has_pattern(heap + 7000, 100, 33));
  fill_pattern(heap + 100, 8192, 40);
  auto got = send_through(p, base + 100, 8192, mrs[0]->lkey);
  ASSERT_EQ(got.size(), 8192u);
  EXPECT_TRUE(has_pattern(got.data(), 8192, 40));
  EXPECT_EQ(ibv_dereg_mr(mrs[0]), 0);
  EXPECT_EQ(ibv_dereg_mr(mrs[2]), 0);
  EXPECT_TRUE(has_pattern(heap + 100, 8192, 40));
  std::free(heap);
}

TEST(MrMemory, DeregisteredMemoryStaysCorrectWhenOtherMemoryIsRegistered) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  constexpr size_t N = 5 * kPage;
  auto* a = static_cast<uint8_t*>(std::malloc(N));
  ASSERT_NE(a, nullptr);
  fill_pattern(a, N, 50);
  ibv_mr* ma = ibv_reg_mr(dev.pd, a, N, kAllRemote);
  ASSERT_NE(ma, nullptr);
  EXPECT_EQ(rdma_write(p, ma->rkey, reinterpret_cast<uint64_t>(a) + 2000, 3000, 51), IBV_WC_SUCCESS);
  ASSERT_EQ(ibv_dereg_mr(ma), 0);
  EXPECT_TRUE(has_pattern(a + 2000, 3000, 51));
  fill_pattern(a, N, 52);
  EXPECT_TRUE(has_pattern(a, N, 52));

  // Other registrations (and writes into them) must not reuse a's pages.
  std::vector<uint8_t*> others;
  for (int i = 0; i < 4; ++i) {
    auto* b = static_cast<uint8_t*>(std::malloc(N));
    ASSERT_NE(b, nullptr);
    others.push_back(b);
    std::memset(b, 0, N);
    ibv_mr* mb = ibv_reg_mr(dev.pd, b, N, kAllRemote);
    ASSERT_NE(mb, nullptr);
    EXPECT_EQ(rdma_write(p, mb->rkey, reinterpret_cast<uint64_t>(b), static_cast<uint32_t>(N), 60 + i),
              IBV_WC_SUCCESS);
    EXPECT_TRUE(has_pattern(b, N, 60 + i));
    EXPECT_EQ(ibv_dereg_mr(mb), 0);
  }
  EXPECT_TRUE(has_pattern(a, N, 52)) << "a deregistered buffer changed when other memory was registered";
  for (auto* b : others) std::free(b);
  std::free(a);
}

TEST(MrMemory, FreeAfterDeregAndReuse) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  // Small (heap), page-sized, and large (its own mmap) allocations.
  for (size_t n : {48ul, 5000ul, 300000ul}) {
    SCOPED_TRACE(n);
    for (int round = 0; round < 3; ++round) {
      auto* buf = static_cast<uint8_t*>(std::malloc(n));
      ASSERT_NE(buf, nullptr);
      fill_pattern(buf, n, 70 + round);
      ibv_mr* mr = ibv_reg_mr(dev.pd, buf, n, kAllRemote);
      ASSERT_NE(mr, nullptr);
      uint32_t len = static_cast<uint32_t>(std::min<size_t>(n, 4096));
      auto got = send_through(p, reinterpret_cast<uint64_t>(buf), len, mr->lkey);
      ASSERT_EQ(got.size(), len);
      EXPECT_EQ(std::memcmp(got.data(), buf, len), 0);
      EXPECT_EQ(ibv_dereg_mr(mr), 0);
      EXPECT_TRUE(has_pattern(buf, n, 70 + round));
      std::free(buf);
    }
  }
  // The heap still works for everyone.
  std::vector<void*> blocks;
  for (int i = 0; i < 200; ++i) {
    blocks.push_back(std::malloc(100 + i * 37));
    std::memset(blocks.back(), i, 100 + i * 37);
  }
  for (void* b : blocks) std::free(b);
}

TEST(MrMemory, UnmappedAndRemappedRangeIsFreshMemory) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  constexpr size_t N = 16 * kPage;
  void* m = mmap(nullptr, N, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  auto* base = static_cast<uint8_t*>(m);
  fill_pattern(base, N, 80);
  ibv_mr* mr = ibv_reg_mr(dev.pd, base, N, kAllRemote);
  ASSERT_NE(mr, nullptr);
  ASSERT_EQ(ibv_dereg_mr(mr), 0);
  ASSERT_EQ(munmap(base, N), 0);
  void* again = mmap(base, N, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
  ASSERT_EQ(again, m) << "could not map the same address again";
  EXPECT_TRUE(bytes_are(base, N, 0)) << "fresh anonymous memory must read as zero";
  fill_pattern(base, N, 81);
  mr = ibv_reg_mr(dev.pd, base, N, kAllRemote);
  ASSERT_NE(mr, nullptr);
  EXPECT_TRUE(has_pattern(base, N, 81));
  auto got = send_through(p, reinterpret_cast<uint64_t>(base) + 5 * kPage, 4096, mr->lkey);
  ASSERT_EQ(got.size(), 4096u);
  EXPECT_EQ(std::memcmp(got.data(), base + 5 * kPage, 4096), 0);
  EXPECT_EQ(rdma_write(p, mr->rkey, reinterpret_cast<uint64_t>(base) + 100, 1000, 82), IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(base + 100, 1000, 82));
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  munmap(base, N);
}

alignas(4096) uint8_t g_static_buf[3 * 4096];

TEST(MrMemory, StackAndStaticBuffersWork) {
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  alignas(64) uint8_t stack_buf[6000];
  struct Case {
    const char* name;
    uint8_t* mem;
    size_t n;
  } cases[] = {{"stack", stack_buf, sizeof stack_buf}, {"static", g_static_buf, sizeof g_static_buf}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    fill_pattern(c.mem, c.n, 90);
    ibv_mr* mr = ibv_reg_mr(dev.pd, c.mem + 10, c.n - 20, kAllRemote);
    ASSERT_NE(mr, nullptr) << strerror(errno);
    EXPECT_TRUE(has_pattern(c.mem, c.n, 90));
    auto got = send_through(p, reinterpret_cast<uint64_t>(c.mem) + 10, 2000, mr->lkey);
    ASSERT_EQ(got.size(), 2000u);
    EXPECT_EQ(std::memcmp(got.data(), c.mem + 10, 2000), 0);
    EXPECT_EQ(rdma_write(p, mr->rkey, reinterpret_cast<uint64_t>(c.mem) + 3000, 1000, 91), IBV_WC_SUCCESS);
    EXPECT_TRUE(has_pattern(c.mem + 3000, 1000, 91));
    EXPECT_EQ(c.mem[2999], static_cast<uint8_t>((2999 * 131 + 90 * 7 + (2999 >> 8)) & 0xff));
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
    EXPECT_TRUE(has_pattern(c.mem + 3000, 1000, 91));
  }
}

}  // namespace

// A buffer on a thread's own stack (anonymous memory like any other) can be
// registered and written remotely; registering it must not disturb the
// thread that is running on that stack.
TEST(MrOnThreadStack, RegisterAndRdmaWriteIntoIt) {
  Device dev;
  QpPair pair(dev, IBV_QPT_RC);
  Buffer src(dev.pd, 64);
  std::memset(src.bytes.data(), 0x5a, 64);
  std::thread worker([&] {
    alignas(64) uint8_t on_stack[64] = {};
    ibv_mr* mr = ibv_reg_mr(dev.pd, on_stack, sizeof on_stack,
                            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    ASSERT_NE(mr, nullptr);
    ibv_sge sge = src.sge(0, 64);
    ibv_send_wr wr{};
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uint64_t>(on_stack);
    wr.wr.rdma.rkey = mr->rkey;
    EXPECT_EQ(post_and_wait(pair.a, pair.cq_a, wr), IBV_WC_SUCCESS);
    for (uint8_t byte : on_stack) ASSERT_EQ(byte, 0x5a);
    EXPECT_EQ(ibv_dereg_mr(mr), 0);
  });
  worker.join();
}

namespace {

// ibv_is_fork_initialized(3): IBV_FORK_UNNEEDED, as rdma-core says on a
// kernel that copies pinned pages at fork. It holds: the parent writes a
// registered buffer after a fork (the page becomes its own copy) and a
// WRITE from it sends what it wrote, the child's copy untouched. (A NIC on
// an older kernel without ibv_fork_init would send the old bytes.)
TEST(MrFork, NoForkInitIsNeeded) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  EXPECT_EQ(ibv_is_fork_initialized(), IBV_FORK_UNNEEDED);
  svtest::Device dev;
  svtest::QpPair pair(dev, IBV_QPT_RC);
  svtest::Buffer local(dev.pd, 4096), remote(dev.pd, 4096);
  local.bytes[0] = 1;
  const pid_t child = fork();
  if (child == 0) {
    local.bytes[0] = 3;  // (its own copy)
    _exit(0);
  }
  local.bytes[0] = 2;  // after the fork: a new page for the parent
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ibv_sge sge = local.sge(0, 8);
  EXPECT_EQ(svtest::post_and_wait(pair.a, pair.cq_a, svtest::write_wr(&sge, remote)), IBV_WC_SUCCESS);
  EXPECT_EQ(remote.bytes[0], 2);
}

}  // namespace
