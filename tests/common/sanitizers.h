// Tests that fork() skip themselves under ThreadSanitizer: forking a
// multi-threaded process (ours always has its keeper thread) can deadlock
// TSan's runtime in the child, which TSan documents as unsupported. They run
// in the normal and ASan jobs.
#pragma once

#include <gtest/gtest.h>

#if defined(__SANITIZE_THREAD__)
#define SV_SKIP_IF_FORK_UNSUPPORTED() GTEST_SKIP() << "fork() is not supported under ThreadSanitizer"
#else
#define SV_SKIP_IF_FORK_UNSUPPORTED() \
  do {                                \
  } while (0)
#endif

// Single-threaded tests that only repeat one scenario over many inputs (the
// RoCE engine's bad-network seeds) run a few inputs under ThreadSanitizer:
// there is no second thread for it to check, and the whole set took 110 s
// under it on a slow CI host. The normal and ASan jobs run them all.
#if defined(__SANITIZE_THREAD__)
inline constexpr bool kUnderThreadSanitizer = true;
#else
inline constexpr bool kUnderThreadSanitizer = false;
#endif
