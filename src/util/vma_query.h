// The mappings of this process over one address range, as the kernel holds
// them at the moment of the call, at a cost that does not grow with the
// number of mappings the process has.
//
// Memory registration needs this on every ibv_reg_mr (is the range mapped,
// with which protections, from which file; is it still our overlay), and
// reading the whole of /proc/self/maps for it made registration O(mappings):
// 65535 registrations of 4 KiB took 45 s. The kernel keeps the interval
// structure we need (its tree of VMAs) and, since Linux 6.11, answers "the
// mapping at or after this address" from it: the PROCMAP_QUERY ioctl on
// /proc/self/maps, O(log mappings) per mapping returned.
//
// Why not a cache of /proc/self/maps of our own: the application maps and
// unmaps behind our back (malloc calls mmap through its own system calls,
// so no symbol interposition sees them), and a cache cannot tell cheaply
// that an entry went stale. "Re-read when an address is not covered" misses
// the dangerous cases: the application unmaps a buffer and maps a shared
// file (or a read-only or PROT_NONE mapping) at the same address; an
// overlay built from the stale entry would cut the application off its file
// or write through a protection. Asking the kernel each time is always
// current, and cheap.
//
// On a kernel without the ioctl (before 6.11, or where a sandbox refuses
// it) this falls back to reading /proc/self/maps whole, as before.
#pragma once

#include <cstdint>
#include <vector>

#include "util/proc_maps.h"

namespace sv {

// The mappings that meet [start, end), in address order (gaps between them
// are unmapped). `with_names`: also their paths ("[heap]", "/memfd:x
// (deleted)", ...), which cost the kernel a d_path each.
std::vector<MapEntry> mappings_over(uint64_t start, uint64_t end, bool with_names = true);

// Whether mappings_over asks the kernel per range (PROCMAP_QUERY), or reads
// /proc/self/maps whole.
bool vma_query_available();

}  // namespace sv
