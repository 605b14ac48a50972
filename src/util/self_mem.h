// Copies to and from this process's own memory that fail instead of
// faulting: through /proc/self/mem, or process_vm_readv/writev. For memory the application may unmap
// or never have mapped (on-demand-paging MRs), and for the bounce thread,
// which copies into registered memory the application may have unmapped.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sv {

// False if any byte of [vaddr, vaddr + len) is not mapped (or the file
// cannot be opened). Writes go through page protections, as a DMA does.
bool self_mem_read(void* dst, uint64_t vaddr, size_t len);
bool self_mem_write(uint64_t vaddr, const void* src, size_t len);

// The same, as an on-demand-paging NIC faults pages in (hmm_range_fault):
// only where the mapping allows the access now, so a PROT_NONE page fails
// both ways and a read-only page fails a write. For on-demand MRs.
bool self_mem_read_as_mapped(void* dst, uint64_t vaddr, size_t len);
bool self_mem_write_as_mapped(uint64_t vaddr, const void* src, size_t len);

}  // namespace sv
