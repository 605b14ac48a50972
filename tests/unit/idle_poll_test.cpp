// When a thread busy-polling an empty CQ yields its core (core/idle_poll.h):
// only once its wait has lasted the set time, at each empty poll from then
// on; a gap between empty polls (the thread did something else, or was
// off its core) starts a new wait; 0 never yields.
#include "core/idle_poll.h"

#include <gtest/gtest.h>

namespace sv {
namespace {

constexpr uint64_t kUs = 1000;

TEST(IdlePoll, YieldsOnlyOnceTheWaitLastedTheSetTime) {
  IdlePoll p(20 * kUs);
  uint64_t t = 1'000'000 * kUs;
  EXPECT_FALSE(p.empty_poll(t));
  for (uint64_t step = 1; step < 20; ++step) EXPECT_FALSE(p.empty_poll(t + step * kUs)) << step;
  EXPECT_TRUE(p.empty_poll(t + 20 * kUs));
  EXPECT_TRUE(p.empty_poll(t + 21 * kUs));  // and at each empty poll after
}

TEST(IdlePoll, AGapStartsANewWait) {
  IdlePoll p(20 * kUs);
  uint64_t t = 1'000'000 * kUs;
  for (uint64_t step = 0; step <= 25; ++step) p.empty_poll(t + step * kUs);
  ASSERT_TRUE(p.empty_poll(t + 26 * kUs));
  // Off the core for a while (the yield gave it away), or busy with
  // completions: polled again without yields at first.
  t += 26 * kUs + IdlePoll::kGapNs + 1;
  EXPECT_FALSE(p.empty_poll(t));
  for (uint64_t step = 1; step < 20; ++step) EXPECT_FALSE(p.empty_poll(t + step * kUs));
  EXPECT_TRUE(p.empty_poll(t + 20 * kUs));
}

TEST(IdlePoll, ZeroNeverYields) {
  IdlePoll p(0);
  for (uint64_t step = 0; step < 1000; ++step) EXPECT_FALSE(p.empty_poll(step * kUs));
}

}  // namespace
}  // namespace sv
