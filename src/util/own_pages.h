// Objects that a library thread reads or writes at any moment, on pages of
// their own (anonymous mmap), never on the application's heap: registering
// a heap buffer overlays its pages (shm/overlay.h: copied into the arena
// and mapped back over themselves), and an object of ours on such a page
// would be written by our thread while the page is being copied, and the
// write lost. (ThreadSanitizer reports the remap as a race with any access.)
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <new>
#include <utility>

namespace sv {

template <class T>
constexpr size_t own_pages_bytes() {
  return (sizeof(T) + 4095) / 4096 * 4096;
}

// nullptr when memory cannot be had.
template <class T, class... Args>
T* new_on_own_pages(Args&&... args) {
  void* p = mmap(nullptr, own_pages_bytes<T>(), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return nullptr;
  return new (p) T{std::forward<Args>(args)...};
}

template <class T>
void delete_on_own_pages(T* t) {
  if (!t) return;
  t->~T();
  munmap(t, own_pages_bytes<T>());
}

}  // namespace sv
