// The QP an rdma_cm_id owns: the attributes each state transition needs
// (rdma_init_qp_attr) and the transitions the CM drives itself.
#pragma once

#include <infiniband/verbs.h>

namespace sv::rdmacm {

struct Id;

// The attributes and mask for moving a QP of `id` to qp_attr->qp_state.
// 0, or -1 with errno (EINVAL: that state needs what the id does not know yet).
int qp_attributes_for(Id* id, ibv_qp_attr* qp_attr, int* qp_attr_mask);

// INIT (again, with the negotiated access) then RTR; RTS; ERR. No-ops (0)
// when the id has no QP. 0, or -1 with errno.
int move_qp_to_rtr(Id* id);
int move_qp_to_rts(Id* id);
int move_qp_to_error(Id* id);

}  // namespace sv::rdmacm
