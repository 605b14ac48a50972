// The C boundary of librdmacm.so.1: how an entry point is exported and how a
// failure becomes "-1 / NULL with errno". Every extern "C" function in this
// directory goes through these helpers (util/c_boundary.h, shared with
// libibverbs) so that no C++ exception ever reaches a C caller.
#pragma once

#include <cerrno>
#include <utility>

#include "util/c_boundary.h"

// Sources are compiled with -fvisibility=hidden; only the functions marked
// with this macro (and listed in librdmacm.map) are exported.
#define SOFTVERBS_RDMACM_EXPORT __attribute__((visibility("default")))

namespace sv::rdmacm {

// int-returning calls: -1 with errno.
using sv::c_boundary::fail;
// Integer results other than int (ssize_t, off_t, size_t): all-ones (-1 or
// SIZE_MAX) with errno, as rdma-core's rsockets does.
using sv::c_boundary::fail_as;
// Pointer-returning calls: NULL with errno.
using sv::c_boundary::fail_null;

// Runs `body` and converts any escaping exception into `on_error` plus errno:
// ENOMEM for allocation failures, EIO for anything else.
template <class R, class F>
R guarded(R on_error, F&& body) noexcept {
  return sv::c_boundary::guarded(on_error, EIO, std::forward<F>(body));
}

// The same for void entry points: an exception is swallowed (errno set).
template <class F>
void guarded_void(F&& body) noexcept {
  sv::c_boundary::guarded_void(EIO, std::forward<F>(body));
}

}  // namespace sv::rdmacm
