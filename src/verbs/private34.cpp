// IBVERBS_PRIVATE_34: the interface between libibverbs and its provider
// libraries. Debian's libmlx5 and libefa (which perftest and pyverbs link)
// import 62 of these symbols and register themselves at load time. softverbs
// has no providers: registrations are accepted and ignored, and the provider
// commands fail with EOPNOTSUPP if anything ever calls them.
#include <cstdarg>

#include "verbs/abi.h"

// Read by providers; meaningless without kernel devices.
extern "C" {
__attribute__((visibility("default"))) bool verbs_allow_disassociate_destroy = false;
}

SV_EXPORT void verbs_register_driver_34(const void* ops) {}

SV_EXPORT void __verbs_log(void* ctx, unsigned int level, const char* fmt, ...) {}
SV_EXPORT unsigned int __ioctl_final_num_attrs(unsigned int num_attrs, void* link) { return num_attrs; }
SV_EXPORT int execute_ioctl(ibv_context*, void*) { return EOPNOTSUPP; }
SV_EXPORT void* _verbs_init_and_alloc_context(ibv_device*, int, size_t, size_t, uint32_t) {
  errno = EOPNOTSUPP;
  return nullptr;
}
SV_EXPORT ibv_context* verbs_open_device(ibv_device*, void*) {
  errno = EOPNOTSUPP;
  return nullptr;
}
SV_EXPORT void verbs_init_cq(ibv_cq*, ibv_context*, ibv_comp_channel*, void*) {}
SV_EXPORT void verbs_set_ops(void*, const void*) {}
SV_EXPORT void verbs_uninit_context(void*) {}
SV_EXPORT int ibv_read_ibdev_sysfs_file(char*, size_t, void*, const char*, ...) { return -1; }

#define PROVIDER_COMMAND(name) \
  SV_EXPORT int name(void) { return EOPNOTSUPP; }

PROVIDER_COMMAND(ibv_cmd_advise_mr)
PROVIDER_COMMAND(ibv_cmd_alloc_dm)
PROVIDER_COMMAND(ibv_cmd_alloc_mw)
PROVIDER_COMMAND(ibv_cmd_alloc_pd)
PROVIDER_COMMAND(ibv_cmd_attach_mcast)
PROVIDER_COMMAND(ibv_cmd_close_xrcd)
PROVIDER_COMMAND(ibv_cmd_create_ah)
PROVIDER_COMMAND(ibv_cmd_create_counters)
PROVIDER_COMMAND(ibv_cmd_create_cq)
PROVIDER_COMMAND(ibv_cmd_create_cq_ex)
PROVIDER_COMMAND(ibv_cmd_create_flow)
PROVIDER_COMMAND(ibv_cmd_create_flow_action_esp)
PROVIDER_COMMAND(ibv_cmd_create_qp)
PROVIDER_COMMAND(ibv_cmd_create_qp_ex)
PROVIDER_COMMAND(ibv_cmd_create_qp_ex2)
PROVIDER_COMMAND(ibv_cmd_create_rwq_ind_table)
PROVIDER_COMMAND(ibv_cmd_create_srq)
PROVIDER_COMMAND(ibv_cmd_create_srq_ex)
PROVIDER_COMMAND(ibv_cmd_create_wq)
PROVIDER_COMMAND(ibv_cmd_dealloc_mw)
PROVIDER_COMMAND(ibv_cmd_dealloc_pd)
PROVIDER_COMMAND(ibv_cmd_dereg_mr)
PROVIDER_COMMAND(ibv_cmd_destroy_ah)
PROVIDER_COMMAND(ibv_cmd_destroy_counters)
PROVIDER_COMMAND(ibv_cmd_destroy_cq)
PROVIDER_COMMAND(ibv_cmd_destroy_flow)
PROVIDER_COMMAND(ibv_cmd_destroy_flow_action)
PROVIDER_COMMAND(ibv_cmd_destroy_qp)
PROVIDER_COMMAND(ibv_cmd_destroy_rwq_ind_table)
PROVIDER_COMMAND(ibv_cmd_destroy_srq)
PROVIDER_COMMAND(ibv_cmd_destroy_wq)
PROVIDER_COMMAND(ibv_cmd_detach_mcast)
PROVIDER_COMMAND(ibv_cmd_free_dm)
PROVIDER_COMMAND(ibv_cmd_get_context)
PROVIDER_COMMAND(ibv_cmd_modify_cq)
PROVIDER_COMMAND(ibv_cmd_modify_flow_action_esp)
PROVIDER_COMMAND(ibv_cmd_modify_qp)
PROVIDER_COMMAND(ibv_cmd_modify_qp_ex)
PROVIDER_COMMAND(ibv_cmd_modify_srq)
PROVIDER_COMMAND(ibv_cmd_modify_wq)
PROVIDER_COMMAND(ibv_cmd_open_qp)
PROVIDER_COMMAND(ibv_cmd_open_xrcd)
PROVIDER_COMMAND(ibv_cmd_poll_cq)
PROVIDER_COMMAND(ibv_cmd_post_recv)
PROVIDER_COMMAND(ibv_cmd_post_send)
PROVIDER_COMMAND(ibv_cmd_post_srq_recv)
PROVIDER_COMMAND(ibv_cmd_query_context)
PROVIDER_COMMAND(ibv_cmd_query_device_any)
PROVIDER_COMMAND(ibv_cmd_query_mr)
PROVIDER_COMMAND(ibv_cmd_query_port)
PROVIDER_COMMAND(ibv_cmd_query_qp)
PROVIDER_COMMAND(ibv_cmd_query_srq)
PROVIDER_COMMAND(ibv_cmd_read_counters)
PROVIDER_COMMAND(ibv_cmd_reg_dm_mr)
PROVIDER_COMMAND(ibv_cmd_reg_dmabuf_mr)
PROVIDER_COMMAND(ibv_cmd_reg_mr)
PROVIDER_COMMAND(ibv_cmd_req_notify_cq)
PROVIDER_COMMAND(ibv_cmd_rereg_mr)
PROVIDER_COMMAND(ibv_cmd_resize_cq)
