// One process at a NIC's scale (issue 39): 65535 MRs. These check that
// everything still works at that size; what each call costs as the objects
// grow is bench/object_costs.sh's to measure, not a test's. (Suites named Scale* carry the label `scale`.)
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

}  // namespace
}  // namespace svtest
