// A share of the process's descriptors (RLIMIT_NOFILE) for a cache or a
// budget of ours, so that what we keep open leaves the application its
// own. Header-only: librdmacm uses it too.
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <cstddef>

namespace sv {

// The soft limit over `divisor`, clamped to [lo, hi]; hi when unlimited or
// unknown.
inline size_t file_limit_share(size_t divisor, size_t lo, size_t hi) {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur == RLIM_INFINITY) return hi;
  return std::clamp<size_t>(files.rlim_cur / divisor, lo, hi);
}

// The soft limit, for messages (0 when unknown).
inline unsigned long long file_limit() {
  rlimit files{};
  return getrlimit(RLIMIT_NOFILE, &files) == 0 ? static_cast<unsigned long long>(files.rlim_cur) : 0;
}

}  // namespace sv
