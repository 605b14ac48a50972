// The C boundary of both our libraries (libibverbs.so.1 through verbs/abi.h,
// librdmacm.so.1 through rdmacm/c_boundary.h): how a failure becomes the
// return value and errno a C caller expects, and how no C++ exception ever
// reaches one (the libzmq model: each entry point checks its arguments,
// calls into C++, and turns failure into errno and a return code).
//
// What a failure returns is the function's own convention, from its man page:
//   -1 with errno                      fail(err): librdmacm, rsockets, a few verbs
//   NULL with errno                    fail_null<T>(err): calls that create an object
//   all ones of another integer type   fail_as<T>(err): rsockets' ssize_t, off_t, size_t
//   the errno value itself             `return err;`: most libibverbs calls (ibv_modify_qp, ...)
// and guarded() gives an exception the caller's value for failure.
#pragma once

#include <cerrno>
#include <new>
#include <type_traits>
#include <utility>

namespace sv::c_boundary {

[[nodiscard]] inline int fail(int err) noexcept {
  errno = err;
  return -1;
}

template <class T>
[[nodiscard]] T* fail_null(int err) noexcept {
  errno = err;
  return nullptr;
}

template <class T>
  requires std::is_integral_v<T>
[[nodiscard]] T fail_as(int err) noexcept {
  errno = err;
  return static_cast<T>(-1);
}

// Runs `body`; should it throw, returns `on_error` with errno ENOMEM for
// std::bad_alloc in both libraries, and `other_errno` for any other
// exception: each library's own choice (verbs/abi.h, rdmacm/c_boundary.h).
template <class R, class F>
R guarded(R on_error, int other_errno, F&& body) noexcept {
  try {
    return std::forward<F>(body)();
  } catch (const std::bad_alloc&) {
    errno = ENOMEM;
  } catch (...) {
    errno = other_errno;
  }
  return on_error;
}

// The same for a call that returns nothing: errno is all it can say.
template <class F>
void guarded_void(int other_errno, F&& body) noexcept {
  try {
    std::forward<F>(body)();
  } catch (const std::bad_alloc&) {
    errno = ENOMEM;
  } catch (...) {
    errno = other_errno;
  }
}

// A post verb (ibv_post_send, ibv_post_recv, ibv_post_srq_recv): `body`'s
// errno value; should it throw, ENOMEM with the first work request as the
// one that failed. Nothing on the data path is expected to allocate (the
// transports take an allocation failure as a lost packet): this only keeps
// an exception from ever reaching C.
template <class Wr, class F>
int guarded_post(Wr* wr, Wr** bad, F&& body) noexcept {
  try {
    return std::forward<F>(body)();
  } catch (...) {
    if (bad) *bad = wr;
    return ENOMEM;
  }
}

}  // namespace sv::c_boundary
