// The library's objects live off the application's heap (util/private_heap.h).
// Registering a heap buffer overlays its whole pages (copied, then mapped back
// over themselves): an object of ours on one of those pages would lose a write
// that another thread, or one of our own, made meanwhile.
#include <infiniband/verbs.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "verbs_fixture.h"
#include "verbs_test_util.h"

using namespace svtest;

namespace {

constexpr uintptr_t kPage = 4096;

struct Object {
  const char* name;
  const void* at;
  size_t len;  // the public struct the application sees
};

std::vector<uintptr_t> pages_of(const Object& o) {
  std::vector<uintptr_t> pages;
  const uintptr_t first = reinterpret_cast<uintptr_t>(o.at) / kPage;
  const uintptr_t last = (reinterpret_cast<uintptr_t>(o.at) + o.len - 1) / kPage;
  for (uintptr_t p = first; p <= last; ++p) pages.push_back(p);
  return pages;
}

// The ranges of the mapping glibc's malloc grows with brk.
std::vector<std::pair<uintptr_t, uintptr_t>> brk_heap() {
  std::vector<std::pair<uintptr_t, uintptr_t>> out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("[heap]") == std::string::npos) continue;
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream in(line);
    in >> std::hex >> lo >> dash >> hi;
    out.emplace_back(lo, hi);
  }
  return out;
}

}  // namespace

TEST(PrivateHeap, VerbsObjectsShareNoPageWithMalloc) {
  Device dev;
  QpPair rc(dev, IBV_QPT_RC);
  QpPair ud(dev, IBV_QPT_UD);
  Buffer buf(dev.pd, 4096);
  ibv_comp_channel* channel = ibv_create_comp_channel(dev.ctx);
  ASSERT_NE(channel, nullptr);
  ibv_srq* srq = create_srq(dev.pd, 16);
  ASSERT_NE(srq, nullptr);
  ibv_mw* mw = ibv_alloc_mw(dev.pd, IBV_MW_TYPE_2);
  ASSERT_NE(mw, nullptr);

  const std::vector<Object> objects = {
      {"context", dev.ctx, sizeof(ibv_context)}, {"pd", dev.pd, sizeof(ibv_pd)},
      {"cq", rc.cq_a, sizeof(ibv_cq)},           {"rc qp", rc.a, sizeof(ibv_qp)},
      {"ud qp", ud.a, sizeof(ibv_qp)},           {"ah", ud.ah_to_b, sizeof(ibv_ah)},
      {"mr", buf.mr, sizeof(ibv_mr)},            {"comp channel", channel, sizeof(ibv_comp_channel)},
      {"srq", srq, sizeof(ibv_srq)},             {"mw", mw, sizeof(ibv_mw)},
  };

  for (const Object& o : objects)
    for (auto [lo, hi] : brk_heap())
      EXPECT_FALSE(reinterpret_cast<uintptr_t>(o.at) >= lo && reinterpret_cast<uintptr_t>(o.at) < hi)
          << o.name << " is on malloc's brk heap";

  // Whatever malloc hands out next, in small and large pieces, never shares
  // a page with one of them.
  std::set<uintptr_t> ours;
  for (const Object& o : objects)
    for (uintptr_t p : pages_of(o)) ours.insert(p);
  const size_t sizes[] = {16, 24, 40, 64, 96, 200, 500, 1000, 3000, 9000};
  std::vector<void*> blocks;
  for (int i = 0; i < 20000; ++i) {
    const size_t n = sizes[i % std::size(sizes)];
    void* b = malloc(n);
    ASSERT_NE(b, nullptr);
    blocks.push_back(b);
    const Object block{"block", b, n};
    for (uintptr_t p : pages_of(block))
      if (ours.count(p)) ADD_FAILURE() << "a malloc block of " << n << " bytes shares page " << std::hex << p * kPage;
  }
  for (void* b : blocks) free(b);

  EXPECT_EQ(ibv_dealloc_mw(mw), 0);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(ibv_destroy_comp_channel(channel), 0);
}
