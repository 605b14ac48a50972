// Conventions of the C ABI shim (the libzmq model): every exported entry
// point checks its handle, calls into the core, turns failure into errno
// and the documented return value, and never lets an exception cross into
// C (util/c_boundary.h, the helpers librdmacm uses too). Entry points with an old-ABI twin (33 of them) are defined under an
// sv_ name and bound to name@@IBVERBS_1.1 with SV_EXPORT_1_1; compat_1_0.cpp
// binds the name@IBVERBS_1.0 versions.
#pragma once

#include <infiniband/verbs.h>

#include <cerrno>
#include <utility>

#include "util/c_boundary.h"

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

// Put before the definition of `sv_<name>`: exports it as the default
// version of <name>. (The symver attribute, unlike a top-level .symver
// directive, survives link-time optimization.)
#define SV_EXPORT_1_1(name) SV_EXPORT __attribute__((symver(#name "@@IBVERBS_1.1")))

namespace sv::abi {

// NULL with errno, for verbs that return a pointer (util/c_boundary.h).
using c_boundary::fail_null;

// Runs `fn`; an exception becomes `on_error` with errno ENOMEM. Allocation
// is the only failure the core is expected to throw, so libibverbs has
// always said ENOMEM for any exception, not only std::bad_alloc.
template <typename Ret, typename Fn>
Ret guarded(Ret on_error, Fn&& fn) noexcept {
  return c_boundary::guarded(on_error, ENOMEM, std::forward<Fn>(fn));
}

using c_boundary::guarded_post;

}  // namespace sv::abi
