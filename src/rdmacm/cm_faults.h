// SOFTVERBS_FAULTS' call= rules for librdmacm's own calls (rdma_create_id,
// rdma_bind_addr, rdma_resolve_addr, rdma_resolve_route, rdma_listen,
// rdma_connect, rdma_accept, rdma_create_qp and _ex): the call fails with
// the rule's errno, as core/faults.h makes the verbs fail. The rules are
// read here from the same variable (faults/fault_rules.h parses them);
// libibverbs.so applies the rest, and reports rules that do not parse (no
// device is listed then). Counted and logged here; not switched from
// outside (softverbs-stat -f reaches libibverbs' rules only).
#pragma once

#include "faults/fault_rules.h"

namespace sv::rdmacm {

// The errno call `c` fails with now, or 0. (Connection setup calls: not
// on a data path.)
int call_fault(faults::Call c);

}  // namespace sv::rdmacm
