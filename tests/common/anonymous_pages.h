// Fresh anonymous private pages, for the tests of memory mappings and
// registrations: their address (a failed mmap fails the test).
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>

namespace svtest {

inline uint64_t map_anonymous_pages(uint64_t pages, uint64_t page_size = 4096) {
  void* m = mmap(nullptr, pages * page_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  EXPECT_NE(m, MAP_FAILED);
  return reinterpret_cast<uint64_t>(m);
}

}  // namespace svtest
