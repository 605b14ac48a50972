// The C boundary of librdmacm.so.1: how an entry point is exported and how a
// failure becomes "-1 / NULL with errno". Every extern "C" function in this
// directory goes through these helpers so that no C++ exception ever reaches
// a C caller.
#pragma once

#include <cerrno>
#include <new>
#include <type_traits>
#include <utility>

// Sources are compiled with -fvisibility=hidden; only the functions marked
// with this macro (and listed in librdmacm.map) are exported.
#define SOFTVERBS_RDMACM_EXPORT __attribute__((visibility("default")))

namespace softverbs::rdmacm {

// What a call reports for a feature this library does not implement (the
// default of the helpers below): clients test for it to skip a feature
// (never ENOSYS).
inline constexpr int kNotImplemented = EOPNOTSUPP;

// int-returning calls: -1 with errno.
[[nodiscard]] inline int fail(int err = kNotImplemented) noexcept {
  errno = err;
  return -1;
}

// Integer results other than int (ssize_t, off_t, size_t): all-ones (-1 or
// SIZE_MAX) with errno, as rdma-core's rsockets does.
template <class T>
  requires std::is_integral_v<T>
[[nodiscard]] T fail_as(int err = kNotImplemented) noexcept {
  errno = err;
  return static_cast<T>(-1);
}

// Pointer-returning calls: NULL with errno.
template <class T>
[[nodiscard]] T* fail_null(int err = kNotImplemented) noexcept {
  errno = err;
  return nullptr;
}

// Runs `body` and converts any escaping exception into `on_error` plus errno
// (ENOMEM for allocation failures, EIO for anything else).
template <class R, class F>
R guarded(R on_error, F&& body) noexcept {
  try {
    return std::forward<F>(body)();
  } catch (const std::bad_alloc&) {
    errno = ENOMEM;
  } catch (...) {
    errno = EIO;
  }
  return on_error;
}

// The same for void entry points: an exception is swallowed (errno set).
template <class F>
void guarded_void(F&& body) noexcept {
  try {
    std::forward<F>(body)();
  } catch (const std::bad_alloc&) {
    errno = ENOMEM;
  } catch (...) {
    errno = EIO;
  }
}

}  // namespace softverbs::rdmacm
