// Monotonic and wall-clock time in nanoseconds.
#pragma once

#include <time.h>

#include <cstdint>

namespace sv {

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

// The same clock at the kernel's tick (a few ms), for caches that expire
// after a second and are looked at per packet: a quarter of the cost
// (no TSC read and scaling in the vDSO).
inline uint64_t coarse_monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

inline uint64_t realtime_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + ts.tv_nsec;
}

}  // namespace sv
