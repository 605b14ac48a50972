// Raw Ethernet: flows, work queues, indirection tables and counters
// (operations of verbs_context, reached through the inline ibv_create_flow,
// ibv_create_wq, ibv_create_rwq_ind_table, ibv_create_counters, ... of
// <infiniband/verbs.h>).
#include "core/qp.h"
#include "core/raw.h"
#include "verbs/abi.h"

namespace sv::abi {

ibv_flow* create_flow_op(ibv_qp* qp, ibv_flow_attr* attr) {
  if (!qp || !attr) return fail_null<ibv_flow>(EINVAL);
  return guarded<ibv_flow*>(nullptr, [&]() -> ibv_flow* { return create_flow(Qp::from(qp), attr); });
}

int destroy_flow_op(ibv_flow* flow) { return flow ? destroy_flow(Flow::from(flow)) : EINVAL; }

ibv_wq* create_wq_op(ibv_context* ctx, ibv_wq_init_attr* attr) {
  if (!attr) return fail_null<ibv_wq>(EINVAL);
  return guarded<ibv_wq*>(nullptr, [&]() -> ibv_wq* { return create_wq(Context::from(ctx), attr); });
}

int modify_wq_op(ibv_wq* wq, ibv_wq_attr* attr) { return wq && attr ? modify_wq(Wq::from(wq), *attr) : EINVAL; }
int destroy_wq_op(ibv_wq* wq) { return wq ? destroy_wq(Wq::from(wq)) : EINVAL; }

ibv_rwq_ind_table* create_rwq_ind_table_op(ibv_context* ctx, ibv_rwq_ind_table_init_attr* attr) {
  if (!attr) return fail_null<ibv_rwq_ind_table>(EINVAL);
  return guarded<ibv_rwq_ind_table*>(
      nullptr, [&]() -> ibv_rwq_ind_table* { return create_rwq_ind_table(Context::from(ctx), *attr); });
}

int destroy_rwq_ind_table_op(ibv_rwq_ind_table* t) { return t ? destroy_rwq_ind_table(RwqIndTable::from(t)) : EINVAL; }

ibv_counters* create_counters_op(ibv_context* ctx, ibv_counters_init_attr* attr) {
  if (!attr) return fail_null<ibv_counters>(EINVAL);
  return guarded<ibv_counters*>(nullptr, [&]() -> ibv_counters* { return create_counters(Context::from(ctx), *attr); });
}

int destroy_counters_op(ibv_counters* c) { return c ? destroy_counters(Counters::from(c)) : EINVAL; }

int attach_counters_point_flow_op(ibv_counters* c, ibv_counter_attach_attr* attr, ibv_flow* flow) {
  return c && attr ? attach_counters_point_flow(Counters::from(c), *attr, flow) : EINVAL;
}

int read_counters_op(ibv_counters* c, uint64_t* values, uint32_t n, uint32_t flags) {
  return c && (values || !n) ? read_counters(Counters::from(c), values, n, flags) : EINVAL;
}

}  // namespace sv::abi
