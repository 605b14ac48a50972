// What ran out, said where a program's user will see it: a create call
// that fails with ENOMEM because a limit of the device was reached logs
// which one, its value and where the program can read it
// (ibv_query_device), once per kind and process, at the default log
// level. A NIC's driver says nothing; but its limits are in the millions,
// and a user meeting ours (or a profile's, core/device_profile.h) should
// not have to guess from a bare ENOMEM.
#pragma once

#include <cstdint>

namespace sv {

enum class Limit {
  kQps,         // max_qp
  kMrs,         // max_mr
  kCqs,         // max_cq
  kPds,         // max_pd
  kAhs,         // max_ah
  kSrqs,        // max_srq
  kMws,         // max_mw
  kQpNumbers,   // the QP numbers of the process's slot (shm/layout.h)
  kMrKeys,      // the memory keys of the process's slot
  kHostNames,   // the host's blocks of names of one kind (shm/name_pool.h)
  kSharedMemory,  // the process's shared-memory arena (SOFTVERBS_ARENA_GB)
  kCount
};

// Logs, the first time only for `which`, that `limit` was reached.
void limit_reached(Limit which, uint64_t limit);
// A name (QPN, memory key, SRQ number) could not be taken: the host's
// blocks of that kind ran out (`host_blocks_out`: kHostNames), or else the
// process's own `which`, `limit`.
void name_limit_reached(bool host_blocks_out, Limit which, uint64_t limit);

}  // namespace sv
