// Fills the function tables of a new context: ibv_context_ops (which the
// inline verbs of <infiniband/verbs.h> call without checking) and
// verbs_context (where a missing operation means EOPNOTSUPP). As in
// rdma-core's dummy_ops.c, nothing is left NULL that a caller may call:
// what this device does not do answers EOPNOTSUPP.
#include <cstring>

#include "core/context.h"
#include "util/clock.h"
#include "verbs/abi.h"
#include "verbs/device.h"

namespace sv::abi {

// Defined next to the objects they serve.
int query_port_op(ibv_context*, uint8_t, ibv_port_attr*, size_t);
int query_device_ex_op(ibv_context*, const ibv_query_device_ex_input*, ibv_device_attr_ex*, size_t);
int poll_cq_op(ibv_cq*, int, ibv_wc*);
int req_notify_cq_op(ibv_cq*, int);
ibv_cq_ex* create_cq_ex_op(ibv_context*, ibv_cq_init_attr_ex*);
int post_send_op(ibv_qp*, ibv_send_wr*, ibv_send_wr**);
int post_recv_op(ibv_qp*, ibv_recv_wr*, ibv_recv_wr**);
ibv_qp* create_qp_ex_op(ibv_context*, ibv_qp_init_attr_ex*);
int post_srq_recv_op(ibv_srq*, ibv_recv_wr*, ibv_recv_wr**);
ibv_srq* create_srq_ex_op(ibv_context*, ibv_srq_init_attr_ex*);
int advise_mr_op(ibv_pd*, ibv_advise_mr_advice, uint32_t, ibv_sge*, uint32_t);
ibv_dm* alloc_dm_op(ibv_context*, ibv_alloc_dm_attr*);
int free_dm_op(ibv_dm*);
ibv_mr* reg_dm_mr_op(ibv_pd*, ibv_dm*, uint64_t, size_t, unsigned int);
ibv_mw* alloc_mw_op(ibv_pd*, ibv_mw_type);
int bind_mw_op(ibv_qp*, ibv_mw*, ibv_mw_bind*);
int dealloc_mw_op(ibv_mw*);
ibv_xrcd* open_xrcd_op(ibv_context*, ibv_xrcd_init_attr*);
int close_xrcd_op(ibv_xrcd*);
int get_srq_num_op(ibv_srq*, uint32_t*);
ibv_qp* open_qp_op(ibv_context*, ibv_qp_open_attr*);
ibv_flow* create_flow_op(ibv_qp*, ibv_flow_attr*);
int destroy_flow_op(ibv_flow*);
ibv_wq* create_wq_op(ibv_context*, ibv_wq_init_attr*);
int modify_wq_op(ibv_wq*, ibv_wq_attr*);
int destroy_wq_op(ibv_wq*);
ibv_rwq_ind_table* create_rwq_ind_table_op(ibv_context*, ibv_rwq_ind_table_init_attr*);
int destroy_rwq_ind_table_op(ibv_rwq_ind_table*);
ibv_counters* create_counters_op(ibv_context*, ibv_counters_init_attr*);
int destroy_counters_op(ibv_counters*);
int attach_counters_point_flow_op(ibv_counters*, ibv_counter_attach_attr*, ibv_flow*);
int read_counters_op(ibv_counters*, uint64_t*, uint32_t, uint32_t);

namespace {

template <typename Ret, typename... Args>
Ret unsupported_int(Args...) {
  return EOPNOTSUPP;
}
template <typename Ret, typename... Args>
Ret* unsupported_ptr(Args...) {
  errno = EOPNOTSUPP;
  return nullptr;
}
void* unsupported_compat() {
  errno = EOPNOTSUPP;
  return nullptr;
}
void placeholder() {}

int query_rt_values(ibv_context*, ibv_values_ex* values) {
  if (values->comp_mask & ~static_cast<uint32_t>(IBV_VALUES_MASK_RAW_CLOCK)) return EINVAL;
  if (values->comp_mask & IBV_VALUES_MASK_RAW_CLOCK) {
    // The completion timestamp clock: CLOCK_MONOTONIC in nanoseconds.
    uint64_t ns = monotonic_ns();
    values->raw_clock.tv_sec = static_cast<time_t>(ns / 1000000000ull);
    values->raw_clock.tv_nsec = static_cast<long>(ns % 1000000000ull);
  }
  return 0;
}

}  // namespace

void install_context_ops(ibv_context* ctx) {
  ibv_context_ops& o = ctx->ops;
  o._compat_query_device = unsupported_int<int, ibv_context*, ibv_device_attr*>;
  o._compat_query_port = unsupported_int<int, ibv_context*, uint8_t, _compat_ibv_port_attr*>;
  o._compat_alloc_pd = o._compat_dealloc_pd = o._compat_reg_mr = o._compat_rereg_mr = o._compat_dereg_mr =
      unsupported_compat;
  o._compat_create_cq = o._compat_cq_event = o._compat_resize_cq = o._compat_destroy_cq = unsupported_compat;
  o._compat_create_srq = o._compat_modify_srq = o._compat_query_srq = o._compat_destroy_srq = unsupported_compat;
  o._compat_create_qp = o._compat_query_qp = o._compat_modify_qp = o._compat_destroy_qp = unsupported_compat;
  o._compat_create_ah = o._compat_destroy_ah = o._compat_attach_mcast = o._compat_detach_mcast =
      o._compat_async_event = unsupported_compat;
  o.alloc_mw = alloc_mw_op;
  o.bind_mw = bind_mw_op;
  o.dealloc_mw = dealloc_mw_op;
  o.poll_cq = poll_cq_op;
  o.req_notify_cq = req_notify_cq_op;
  o.post_srq_recv = post_srq_recv_op;
  o.post_send = post_send_op;
  o.post_recv = post_recv_op;

  verbs_context* v = verbs_get_ctx(ctx);
  v->query_port = query_port_op;
  v->advise_mr = advise_mr_op;
  v->alloc_null_mr = unsupported_ptr<ibv_mr, ibv_pd*>;
  v->read_counters = read_counters_op;
  v->attach_counters_point_flow = attach_counters_point_flow_op;
  v->create_counters = create_counters_op;
  v->destroy_counters = destroy_counters_op;
  v->reg_dm_mr = reg_dm_mr_op;
  v->alloc_dm = alloc_dm_op;
  v->free_dm = free_dm_op;
  v->modify_flow_action_esp = unsupported_int<int, ibv_flow_action*, ibv_flow_action_esp_attr*>;
  v->destroy_flow_action = unsupported_int<int, ibv_flow_action*>;
  v->create_flow_action_esp = unsupported_ptr<ibv_flow_action, ibv_context*, ibv_flow_action_esp_attr*>;
  v->modify_qp_rate_limit = unsupported_int<int, ibv_qp*, ibv_qp_rate_limit_attr*>;
  v->alloc_parent_domain = unsupported_ptr<ibv_pd, ibv_context*, ibv_parent_domain_init_attr*>;
  v->dealloc_td = unsupported_int<int, ibv_td*>;
  v->alloc_td = unsupported_ptr<ibv_td, ibv_context*, ibv_td_init_attr*>;
  v->modify_cq = unsupported_int<int, ibv_cq*, ibv_modify_cq_attr*>;
  v->post_srq_ops = unsupported_int<int, ibv_srq*, ibv_ops_wr*, ibv_ops_wr**>;
  v->destroy_rwq_ind_table = destroy_rwq_ind_table_op;
  v->create_rwq_ind_table = create_rwq_ind_table_op;
  v->destroy_wq = destroy_wq_op;
  v->modify_wq = modify_wq_op;
  v->create_wq = create_wq_op;
  v->query_rt_values = query_rt_values;
  v->create_cq_ex = create_cq_ex_op;
  v->priv = nullptr;
  v->query_device_ex = query_device_ex_op;
  v->ibv_destroy_flow = destroy_flow_op;
  v->ABI_placeholder2 = placeholder;
  v->ibv_create_flow = create_flow_op;
  v->ABI_placeholder1 = placeholder;
  v->open_qp = open_qp_op;
  v->create_qp_ex = create_qp_ex_op;
  v->get_srq_num = get_srq_num_op;
  v->create_srq_ex = create_srq_ex_op;
  v->open_xrcd = open_xrcd_op;
  v->close_xrcd = close_xrcd_op;
}

}  // namespace sv::abi
