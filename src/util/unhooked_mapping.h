// Mapping calls that go to the kernel directly, past libc's mmap and
// mremap.
//
// Memory hooks replace those libc functions in the application: UCX's
// libucm (Open MPI, MPICH and every UCX program) patches them and tells its
// registration cache that a range is unmapped before each MAP_FIXED mmap
// or mremap runs. Where softverbs swaps the pages under application memory
// for pages of the same bytes (the overlay, and a fork child getting its
// private copies back), nothing was unmapped from the application's point
// of view, and the hook must not run: it writes its own state, and when
// that state sits on a page being swapped (the hook runs after the bytes
// were copied), the write lands in the old page and is lost. UCX's cache
// then hands one block out twice and its page table breaks.
#pragma once

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

namespace sv {

// mmap(2) without the application's hooks; MAP_FAILED and errno on failure.
inline void* unhooked_mmap(void* addr, size_t len, int prot, int flags, int fd, off_t offset) {
  long r = syscall(SYS_mmap, addr, len, prot, flags, fd, offset);
  return r == -1 ? MAP_FAILED : reinterpret_cast<void*>(r);
}

// mremap(2) to a fixed address without the application's hooks.
inline void* unhooked_mremap_fixed(void* old_addr, size_t old_len, size_t new_len, void* new_addr) {
  long r = syscall(SYS_mremap, old_addr, old_len, new_len, MREMAP_MAYMOVE | MREMAP_FIXED, new_addr);
  return r == -1 ? MAP_FAILED : reinterpret_cast<void*>(r);
}

}  // namespace sv
