// The locked-memory budget registrations are charged to, as the kernel's
// ib_umem_get charges them to the process's pinned_vm: the pages an MR
// spans count against RLIMIT_MEMLOCK unless the process has CAP_IPC_LOCK
// (in the initial user namespace: the kernel's capable()), and a
// registration past the limit fails with ENOMEM. A program that passes on
// softverbs then does not fail on a cluster for want of `ulimit -l`.
// On-demand MRs pin nothing and are not charged (ib_umem_odp_get); neither
// are device-memory MRs. SOFTVERBS_MEMLOCK=ignore turns the check off.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sv {

// The number of pages [addr, addr+length) spans.
uint64_t pages_spanned(uint64_t addr, uint64_t length);
// Charges `pages` to this process: true, or false (nothing charged) when
// that would pass the limit.
bool charge_pinned_pages(uint64_t pages);
void uncharge_pinned_pages(uint64_t pages);
// What is charged now (for tests and diagnostics).
uint64_t pinned_pages();

}  // namespace sv
