// The IB QP state machine (IBTA 1.x, chapter 10.3 / Linux ib_modify_qp_is_ok):
// which transitions exist, and for each QP type which attribute-mask bits
// each transition requires and which it allows.
#pragma once

#include <infiniband/verbs.h>

namespace sv {

struct QpTransition {
  bool valid = false;
  unsigned required = 0;  // ibv_qp_attr_mask bits
  unsigned optional = 0;
};

// The row for (from -> to) of a QP of `type`. Types without a table (e.g.
// RAW_PACKET's RESET->INIT) are included where they differ.
QpTransition qp_transition(ibv_qp_state from, ibv_qp_state to, ibv_qp_type type);

// True when `mask` is acceptable for moving a QP of `type` from `cur` (the
// QP's real state) to the state it requests (mask & IBV_QP_STATE ?
// attr.qp_state : cur). Mirrors the kernel's check, including the rule that
// IBV_QP_CUR_STATE is only meaningful from RTR, RTS, SQD and SQE.
bool qp_mask_ok(ibv_qp_state cur, ibv_qp_state next, ibv_qp_type type, unsigned mask);

const char* qp_state_name(ibv_qp_state s);

}  // namespace sv
