#include "shm/extent_allocator.h"

#include "util/bits.h"

namespace sv::shm {

ExtentAllocator::ExtentAllocator(uint64_t begin, uint64_t end, uint64_t granule, uint64_t quarantine_ns)
    : granule_(granule), quarantine_ns_(quarantine_ns) {
  begin = align_up(begin, granule);
  end = align_down(end, granule);
  if (end > begin) free_[begin] = end - begin;
}

uint64_t ExtentAllocator::allocate(uint64_t size) {
  size = align_up(size ? size : 1, granule_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    uint64_t off = it->first, left = it->second - size;
    free_.erase(it);
    if (left) free_[off + size] = left;
    in_use_ += size;
    return off;
  }
  return 0;
}

void ExtentAllocator::release(uint64_t offset, uint64_t size, uint64_t now_ns) {
  size = align_up(size ? size : 1, granule_);
  in_use_ -= size;
  quarantine_.push_back({offset, size, now_ns + quarantine_ns_});
}

void ExtentAllocator::insert_free(uint64_t offset, uint64_t size) {
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == offset) {
      prev->second += size;
      return;
    }
  }
  free_[offset] = size;
}

}  // namespace sv::shm
