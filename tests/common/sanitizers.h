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
