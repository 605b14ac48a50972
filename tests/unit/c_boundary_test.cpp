// The C boundary both libraries share (util/c_boundary.h): what a C caller
// sees when a call fails or its C++ body throws.
#include "util/c_boundary.h"

#include <gtest/gtest.h>
#include <sys/types.h>

#include <cerrno>
#include <cstdint>
#include <new>
#include <stdexcept>

namespace sv::c_boundary {
namespace {

TEST(CBoundary, FailuresCarryErrnoAndTheCallsValue) {
  errno = 0;
  EXPECT_EQ(fail(EINVAL), -1);
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(fail_null<int>(ENODEV), nullptr);
  EXPECT_EQ(errno, ENODEV);
  EXPECT_EQ(fail_as<ssize_t>(EAGAIN), -1);
  EXPECT_EQ(errno, EAGAIN);
  EXPECT_EQ(fail_as<size_t>(EBADF), SIZE_MAX);
  EXPECT_EQ(errno, EBADF);
}

TEST(CBoundary, GuardedPassesResultsThrough) {
  errno = 0;
  EXPECT_EQ(guarded(-1, EIO, [] { return 7; }), 7);
  EXPECT_EQ(errno, 0);
}

TEST(CBoundary, AllocationFailureIsEnomemWhateverTheLibrarysChoice) {
  for (int other : {EIO, ENOMEM}) {
    errno = 0;
    EXPECT_EQ(guarded(-1, other, []() -> int { throw std::bad_alloc(); }), -1);
    EXPECT_EQ(errno, ENOMEM);
    errno = 0;
    guarded_void(other, [] { throw std::bad_alloc(); });
    EXPECT_EQ(errno, ENOMEM);
  }
}

TEST(CBoundary, OtherExceptionsGetTheLibrarysErrno) {
  errno = 0;
  int* none = nullptr;
  EXPECT_EQ(guarded(none, EIO, []() -> int* { throw std::runtime_error("x"); }), nullptr);
  EXPECT_EQ(errno, EIO);
  errno = 0;
  EXPECT_EQ(guarded(EINVAL, ENOMEM, []() -> int { throw 42; }), EINVAL);
  EXPECT_EQ(errno, ENOMEM);
  errno = 0;
  guarded_void(EIO, [] { throw std::logic_error("x"); });
  EXPECT_EQ(errno, EIO);
}

// A post verb that throws fails as a whole: ENOMEM, the first work request
// named as the bad one; one that does not throw answers as it would.
TEST(CBoundary, APostThatThrowsNamesItsFirstWorkRequest) {
  struct Wr {
    int id;
  } first{1}, second{2};
  Wr* bad = &second;
  EXPECT_EQ(guarded_post(&first, &bad, []() -> int { throw std::bad_alloc(); }), ENOMEM);
  EXPECT_EQ(bad, &first);
  bad = nullptr;
  EXPECT_EQ(guarded_post(&first, &bad, [&] { bad = &second; return EINVAL; }), EINVAL);
  EXPECT_EQ(bad, &second);
  EXPECT_EQ(guarded_post(&first, static_cast<Wr**>(nullptr), [] { return 0; }), 0);
}

}  // namespace
}  // namespace sv::c_boundary
