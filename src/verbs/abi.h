// Conventions of the C ABI shim (the libzmq model): every exported entry
// point checks its handle, calls into the core, turns failure into errno
// and the documented return value, and never lets an exception cross into
// C. Entry points with an old-ABI twin (33 of them) are defined under an
// sv_ name and bound to name@@IBVERBS_1.1 with SV_EXPORT_1_1; compat_1_0.cpp
// binds the name@IBVERBS_1.0 versions.
#pragma once

#include <infiniband/verbs.h>

#include <cerrno>
#include <new>

#define SV_EXPORT extern "C" __attribute__((visibility("default")))

// Put before the definition of `sv_<name>`: exports it as the default
// version of <name>. (The symver attribute, unlike a top-level .symver
// directive, survives link-time optimization.)
#define SV_EXPORT_1_1(name) SV_EXPORT __attribute__((symver(#name "@@IBVERBS_1.1")))

namespace sv::abi {

// Runs `fn`; maps exceptions (only allocation failure is expected) to ENOMEM.
template <typename Ret, typename Fn>
Ret guarded(Ret on_error, Fn&& fn) noexcept {
  try {
    return fn();
  } catch (...) {
    errno = ENOMEM;
    return on_error;
  }
}

// For verbs that return a pointer: NULL with errno set on failure.
template <typename T>
T* fail_ptr(int err) {
  errno = err;
  return nullptr;
}

}  // namespace sv::abi
