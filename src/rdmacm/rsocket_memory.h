// rsockets: memory for the buffers we register. It comes from mmap, never
// from the heap: registration overlays whole pages (docs/ARCHITECTURE.md,
// "Registered memory"), and a heap page shared with the allocator's own
// bookkeeping would then be registered too, which a fork() of the
// application must not trip over. Whole pages of our own avoid that.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace sv::rdmacm::rs {

struct Pages {
  uint8_t* data = nullptr;
  size_t size = 0;  // whole pages
};

// Zeroed pages covering `len` bytes; data null on failure (errno set).
inline Pages map_pages(size_t len) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  Pages p;
  p.size = (len + page - 1) / page * page;
  void* m = mmap(nullptr, p.size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return Pages{};
  p.data = static_cast<uint8_t*>(m);
  return p;
}

inline void unmap_pages(Pages& p) {
  if (p.data) munmap(p.data, p.size);
  p = Pages{};
}

}  // namespace sv::rdmacm::rs
