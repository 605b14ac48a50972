#include "util/private_heap.h"

#include <pthread.h>
#include <sys/mman.h>

#include <mutex>

namespace sv {
namespace {

constexpr size_t kPage = 4096;

size_t whole_pages(size_t n) { return (n + kPage - 1) / kPage * kPage; }

// The pool's source of memory: anonymous mappings, never the application's
// malloc.
class MappedPages final : public std::pmr::memory_resource {
  void* do_allocate(size_t bytes, size_t alignment) override {
    // mmap gives page alignment; the pool asks its large chunks aligned to
    // their size: map more and trim both ends.
    const size_t len = whole_pages(bytes), extra = alignment > kPage ? alignment : 0;
    void* p = mmap(nullptr, len + extra, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    if (!extra) return p;
    const uintptr_t start = reinterpret_cast<uintptr_t>(p), at = (start + alignment - 1) & ~(alignment - 1);
    if (at > start) munmap(p, at - start);
    if (const size_t tail = start + len + extra - (at + len)) munmap(reinterpret_cast<void*>(at + len), tail);
    return reinterpret_cast<void*>(at);
  }
  void do_deallocate(void* p, size_t bytes, size_t) override { munmap(p, whole_pages(bytes)); }
  bool do_is_equal(const memory_resource& o) const noexcept override { return this == &o; }
};

class PrivateHeap;
PrivateHeap& heap();

// One lock around an unsynchronized pool. (synchronized_pool_resource keeps
// per-thread pools behind a pthread key whose destructor calls into this
// library at thread exit, which crashes once a dlclose unloaded it: Open
// MPI's openib component does.)
class PrivateHeap final : public std::pmr::memory_resource {
 public:
  PrivateHeap() {
    // Like malloc's arenas: held across fork(), so a child never inherits
    // a pool in the middle of a change by another thread. Registered when
    // the library loads, before any other handler of ours (a constructor
    // of the highest priority): prepare handlers run last-registered first
    // and child handlers in order, so ours is the last lock taken and the
    // first let go, and the other handlers may allocate.
    pthread_atfork([] { heap().mu_.lock(); }, [] { heap().mu_.unlock(); }, [] { heap().mu_.unlock(); });
  }

 private:
  void* do_allocate(size_t bytes, size_t alignment) override {
    std::lock_guard g(mu_);
    return pool_.allocate(bytes, alignment);
  }
  void do_deallocate(void* p, size_t bytes, size_t alignment) override {
    std::lock_guard g(mu_);
    pool_.deallocate(p, bytes, alignment);
  }
  bool do_is_equal(const memory_resource& o) const noexcept override { return this == &o; }

  friend PrivateHeap& heap();
  std::mutex mu_;
  MappedPages pages_;
  // Blocks up to 4 MiB are kept for reuse, as malloc keeps them: a
  // RoCEv2 READ's landing buffer (a message long) freed and taken again
  // per message would otherwise cost an mmap, a munmap and a page fault
  // per page each time (ib_read_bw -s 1M lost 30%).
  std::pmr::unsynchronized_pool_resource pool_{std::pmr::pool_options{0, size_t{4} << 20}, &pages_};
};

PrivateHeap& heap() {
  // In this library's own static storage, never the application's heap;
  // never destroyed (detached threads allocate until exit).
  alignas(PrivateHeap) static unsigned char storage[sizeof(PrivateHeap)];
  static PrivateHeap* h = new (storage) PrivateHeap;
  return *h;
}

__attribute__((constructor(101))) void make_at_load() { heap(); }

}  // namespace

std::pmr::memory_resource& private_heap() { return heap(); }

}  // namespace sv
