#include "shm/extent_allocator.h"

#include <gtest/gtest.h>

#include <vector>

namespace sv::shm {
namespace {

TEST(ExtentAllocator, AllocatesAlignedDisjointRanges) {
  ExtentAllocator a(4096, 4096 + 64 * 100, 64, 1000);
  uint64_t x = a.allocate(1), y = a.allocate(65), z = a.allocate(64);
  EXPECT_EQ(x, 4096u);
  EXPECT_EQ(y, 4096u + 64);
  EXPECT_EQ(z, 4096u + 192);  // 65 bytes took two granules
  EXPECT_EQ(a.bytes_in_use(), 64u * 4);
}

TEST(ExtentAllocator, FreedRangeIsQuarantinedBeforeReuse) {
  ExtentAllocator a(64, 64 + 64 * 2, 64, 1000);
  uint64_t x = a.allocate(64), y = a.allocate(64);
  ASSERT_NE(x, 0u);
  ASSERT_NE(y, 0u);
  EXPECT_EQ(a.allocate(64), 0u);  // full
  a.release(x, 64, /*now=*/10);
  std::vector<uint64_t> reclaimed;
  a.reclaim(500, [&](uint64_t off, uint64_t) { reclaimed.push_back(off); });
  EXPECT_TRUE(reclaimed.empty());
  EXPECT_EQ(a.allocate(64), 0u);  // still quarantined
  a.reclaim(1010, [&](uint64_t off, uint64_t) { reclaimed.push_back(off); });
  ASSERT_EQ(reclaimed.size(), 1u);
  EXPECT_EQ(reclaimed[0], x);
  EXPECT_EQ(a.allocate(64), x);
}

TEST(ExtentAllocator, CoalescesNeighbours) {
  ExtentAllocator a(0x1000, 0x1000 + 64 * 3, 64, 0);
  uint64_t x = a.allocate(64), y = a.allocate(64), z = a.allocate(64);
  a.release(x, 64, 0);
  a.release(z, 64, 0);
  a.release(y, 64, 0);
  a.reclaim(1, [](uint64_t, uint64_t) {});
  EXPECT_EQ(a.allocate(192), x);  // one range again
}

}  // namespace
}  // namespace sv::shm
