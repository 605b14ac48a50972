// The library's own heap: memory for every object that outlives a verbs call
// (QPs, CQs, their queues, the transports' state), kept off the
// application's heap.
//
// Why: registering a heap buffer overlays its pages (shm/overlay.h: copied
// into the arena and mapped back over themselves). Anything else on those
// pages that is written during the copy loses the write. The application
// can keep its own threads off a buffer it is registering, but it cannot
// know where our objects are: a QP that shared a page with the buffer would
// lose a post made by another thread, and our network, raw-packet and
// scheduler threads write QPs and queues at any moment. So our objects live
// on pages the application never allocates from (anonymous mappings of our
// own, carved by a std::pmr pool).
//
// What stays on the application's heap: short-lived locals of a single call,
// and strings and other values written only while their object is built.
#pragma once

#include <cstddef>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <memory_resource>
#include <new>
#include <set>
#include <unordered_map>
#include <vector>

namespace sv {

// Never destroyed: detached threads use it until the process exits.
std::pmr::memory_resource& private_heap();

// Base of a library object: `new T` and `delete t` use the private heap.
struct PrivateHeapObject {
  static void* operator new(size_t n) { return private_heap().allocate(n, alignof(std::max_align_t)); }
  static void* operator new(size_t n, std::align_val_t a) {
    return private_heap().allocate(n, static_cast<size_t>(a));
  }
  static void operator delete(void* p, size_t n) { private_heap().deallocate(p, n, alignof(std::max_align_t)); }
  static void operator delete(void* p, size_t n, std::align_val_t a) {
    private_heap().deallocate(p, n, static_cast<size_t>(a));
  }
};

// Stateless, so containers that use it stay the size of std's.
template <class T>
struct PrivateAllocator {
  using value_type = T;
  PrivateAllocator() noexcept = default;
  template <class U>
  PrivateAllocator(const PrivateAllocator<U>&) noexcept {}
  T* allocate(size_t n) { return static_cast<T*>(private_heap().allocate(n * sizeof(T), alignof(T))); }
  void deallocate(T* p, size_t n) noexcept { private_heap().deallocate(p, n * sizeof(T), alignof(T)); }
  template <class U>
  bool operator==(const PrivateAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using PrivateVector = std::vector<T, PrivateAllocator<T>>;
template <class T>
using PrivateDeque = std::deque<T, PrivateAllocator<T>>;
template <class T>
using PrivateList = std::list<T, PrivateAllocator<T>>;
template <class K, class V, class Less = std::less<K>>
using PrivateMap = std::map<K, V, Less, PrivateAllocator<std::pair<const K, V>>>;
template <class K, class Less = std::less<K>>
using PrivateSet = std::set<K, Less, PrivateAllocator<K>>;
template <class K, class V, class Hash = std::hash<K>, class Eq = std::equal_to<K>>
using PrivateUnorderedMap = std::unordered_map<K, V, Hash, Eq, PrivateAllocator<std::pair<const K, V>>>;

// `new T(args...)` on the private heap, for the library's singletons of
// standard types (never destroyed: threads may use them until exit).
template <class T, class... Args>
T* new_private(Args&&... args) {
  return new (private_heap().allocate(sizeof(T), alignof(T))) T(std::forward<Args>(args)...);
}

template <class T, class... Args>
std::shared_ptr<T> make_private_shared(Args&&... args) {
  return std::allocate_shared<T>(PrivateAllocator<T>{}, std::forward<Args>(args)...);
}

}  // namespace sv
