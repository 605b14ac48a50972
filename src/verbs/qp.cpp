// Queue pairs.
#include <cstring>

#include "core/qp.h"
#include "verbs/abi.h"

using namespace sv;

namespace sv::abi {

int post_send_op(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  return guarded_post(wr, bad, [&] { return post_send(Qp::from(qp), wr, bad); });
}
int post_recv_op(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return guarded_post(wr, bad, [&] { return post_recv(Qp::from(qp), wr, bad); });
}

ibv_qp* create_qp_ex_op(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  return guarded<ibv_qp*>(nullptr, [&]() -> ibv_qp* {
    Qp* qp = create_qp(Context::from(context), attr);
    return qp ? qp->ibv() : nullptr;
  });
}

}  // namespace sv::abi

SV_EXPORT_1_1(ibv_create_qp) ibv_qp* sv_ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (!pd || !attr) return abi::fail_null<ibv_qp>(EINVAL);
  ibv_qp_init_attr_ex ex{};
  std::memcpy(&ex, attr, sizeof *attr);
  ex.comp_mask = IBV_QP_INIT_ATTR_PD;
  ex.pd = pd;
  ibv_qp* qp = abi::create_qp_ex_op(pd->context, &ex);
  if (qp) attr->cap = ex.cap;
  return qp;
}

SV_EXPORT_1_1(ibv_modify_qp) int sv_ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  return modify_qp(Qp::from(qp), attr, attr_mask);
}

SV_EXPORT_1_1(ibv_query_qp) int sv_ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
  return query_qp(Qp::from(qp), attr, attr_mask, init_attr);
}

SV_EXPORT_1_1(ibv_destroy_qp) int sv_ibv_destroy_qp(ibv_qp* qp) { return destroy_qp(Qp::from(qp)); }

// Like rdma-core: the extended QP is available when it was created with
// IBV_QP_INIT_ATTR_SEND_OPS_FLAGS.
SV_EXPORT ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  Qp* q = Qp::from(qp);
  return q->send_ops_flags ? q : nullptr;
}

// Completions and data are delivered in order on every QP of this device.
SV_EXPORT int ibv_query_qp_data_in_order(ibv_qp* qp, ibv_wr_opcode op, uint32_t flags) {
  return flags ? 0 : 1;
}

// Enhanced connection establishment: nothing to negotiate on this device.
SV_EXPORT int ibv_query_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
SV_EXPORT int ibv_set_ece(ibv_qp*, ibv_ece*) { return EOPNOTSUPP; }
