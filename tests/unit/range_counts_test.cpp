// RangeCounts: holders of overlapping, nested and adjacent ranges, counted
// per address, as the overlay map keeps its live direct registrations.
#include "util/range_counts.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace sv {
namespace {

TEST(RangeCounts, OverlappingRangesCountEachAddress) {
  RangeCounts r;
  r.add(100, 200);
  r.add(150, 300);
  EXPECT_EQ(r.count_at(99), 0u);
  EXPECT_EQ(r.count_at(100), 1u);
  EXPECT_EQ(r.count_at(150), 2u);
  EXPECT_EQ(r.count_at(199), 2u);
  EXPECT_EQ(r.count_at(200), 1u);
  EXPECT_EQ(r.count_at(300), 0u);
  EXPECT_TRUE(r.overlaps(0, 101));
  EXPECT_FALSE(r.overlaps(0, 100)) << "[start, end): the end is not held";
  EXPECT_FALSE(r.overlaps(300, 400));
  EXPECT_TRUE(r.overlaps(299, 300));
  EXPECT_TRUE(r.overlaps(0, 1000)) << "a query range around everything";
  r.remove(100, 200);
  EXPECT_FALSE(r.overlaps(100, 150));
  EXPECT_EQ(r.count_at(150), 1u);
  r.remove(150, 300);
  EXPECT_FALSE(r.overlaps(0, UINT64_MAX));
  EXPECT_EQ(r.segments(), 0u);
}

TEST(RangeCounts, AdjacentRangesMergeAndSplitAgain) {
  RangeCounts r;
  r.add(0, 4096);
  r.add(4096, 8192);
  EXPECT_EQ(r.segments(), 1u) << "two adjacent holders of one count are one segment";
  EXPECT_TRUE(r.overlaps(4095, 4097));
  r.remove(0, 4096);
  EXPECT_FALSE(r.overlaps(0, 4096));
  EXPECT_TRUE(r.overlaps(4096, 4097));
  EXPECT_EQ(r.segments(), 1u);
}

TEST(RangeCounts, NestedAndRepeatedRanges) {
  RangeCounts r;
  r.add(0, 1000);
  r.add(0, 1000);
  r.add(400, 600);
  EXPECT_EQ(r.count_at(500), 3u);
  EXPECT_EQ(r.segments(), 3u);
  r.remove(0, 1000);
  EXPECT_EQ(r.count_at(500), 2u);
  EXPECT_EQ(r.count_at(0), 1u);
  r.remove(0, 1000);
  EXPECT_EQ(r.count_at(0), 0u);
  EXPECT_TRUE(r.overlaps(450, 460));
  EXPECT_FALSE(r.overlaps(600, 1000));
  r.remove(400, 600);
  EXPECT_EQ(r.segments(), 0u);
}

TEST(RangeCounts, RemovingWhatIsNotHeldChangesNothing) {
  RangeCounts r;
  r.add(100, 200);
  r.remove(50, 150);  // reaches outside what is held
  r.remove(300, 400);
  r.remove(7, 7);
  EXPECT_EQ(r.count_at(100), 1u);
  EXPECT_EQ(r.count_at(199), 1u);
  EXPECT_EQ(r.segments(), 1u);
}

// The implicit on-demand MR holds the whole address space.
TEST(RangeCounts, TheWholeAddressSpace) {
  RangeCounts r;
  r.add(4096, 8192);
  r.add(0, UINT64_MAX);
  EXPECT_TRUE(r.overlaps(1ull << 40, (1ull << 40) + 1));
  EXPECT_EQ(r.count_at(5000), 2u);
  r.remove(0, UINT64_MAX);
  EXPECT_FALSE(r.overlaps(0, 4096));
  EXPECT_TRUE(r.overlaps(4096, 4097));
  EXPECT_EQ(r.segments(), 1u);
}

// Against a plain array of counts, under random adds and removes of ranges
// that overlap, nest and touch.
TEST(RangeCounts, AgreesWithCountsPerAddress) {
  constexpr uint64_t kSpace = 64;
  std::mt19937_64 rng(39);
  RangeCounts r;
  std::vector<uint32_t> counts(kSpace, 0);
  std::vector<std::pair<uint64_t, uint64_t>> held;
  for (int step = 0; step < 4000; ++step) {
    if (held.empty() || rng() % 3 != 0) {
      uint64_t a = rng() % kSpace, b = a + 1 + rng() % (kSpace - a);
      r.add(a, b);
      held.emplace_back(a, b);
      for (uint64_t i = a; i < b; ++i) ++counts[i];
    } else {
      size_t k = rng() % held.size();
      auto [a, b] = held[k];
      held.erase(held.begin() + static_cast<long>(k));
      r.remove(a, b);
      for (uint64_t i = a; i < b; ++i) --counts[i];
    }
    for (uint64_t i = 0; i < kSpace; ++i) ASSERT_EQ(r.count_at(i), counts[i]) << "step " << step << " at " << i;
    uint64_t a = rng() % kSpace, b = a + 1 + rng() % (kSpace - a);
    bool any = false;
    for (uint64_t i = a; i < b; ++i) any |= counts[i] != 0;
    ASSERT_EQ(r.overlaps(a, b), any) << "step " << step;
    ASSERT_LE(r.segments(), 2 * held.size() + 1);
  }
}

}  // namespace
}  // namespace sv
