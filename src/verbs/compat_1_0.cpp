// The libibverbs 1.0 ABI (2006): 33 entry points that took the old,
// differently laid out structs, kept by rdma-core as name@IBVERBS_1.0 for
// binaries linked back then. No program in Debian uses them (every consumer
// binds the @@IBVERBS_1.1 versions); softverbs exports them so the symbol
// table matches and refuses them with EOPNOTSUPP.
#include "verbs/abi.h"

#define SV_COMPAT(name) SV_EXPORT __attribute__((symver(#name "@IBVERBS_1.0")))
#define COMPAT_PTR(name)                  \
  SV_COMPAT(name) void* sv_compat_##name(void) { \
    errno = EOPNOTSUPP;                   \
    return nullptr;                       \
  }
#define COMPAT_INT(name) \
  SV_COMPAT(name) int sv_compat_##name(void) { return EOPNOTSUPP; }
#define COMPAT_VOID(name) \
  SV_COMPAT(name) void sv_compat_##name(void) {}

COMPAT_VOID(ibv_ack_async_event)
COMPAT_VOID(ibv_ack_cq_events)
COMPAT_PTR(ibv_alloc_pd)
COMPAT_INT(ibv_attach_mcast)
COMPAT_INT(ibv_close_device)
COMPAT_PTR(ibv_create_ah)
COMPAT_PTR(ibv_create_cq)
COMPAT_PTR(ibv_create_qp)
COMPAT_PTR(ibv_create_srq)
COMPAT_INT(ibv_dealloc_pd)
COMPAT_INT(ibv_dereg_mr)
COMPAT_INT(ibv_destroy_ah)
COMPAT_INT(ibv_destroy_cq)
COMPAT_INT(ibv_destroy_qp)
COMPAT_INT(ibv_destroy_srq)
COMPAT_INT(ibv_detach_mcast)
COMPAT_VOID(ibv_free_device_list)
COMPAT_INT(ibv_get_async_event)
COMPAT_INT(ibv_get_cq_event)
COMPAT_INT(ibv_get_device_guid)
COMPAT_PTR(ibv_get_device_list)
COMPAT_PTR(ibv_get_device_name)
COMPAT_INT(ibv_modify_qp)
COMPAT_INT(ibv_modify_srq)
COMPAT_PTR(ibv_open_device)
COMPAT_INT(ibv_query_device)
COMPAT_INT(ibv_query_gid)
COMPAT_INT(ibv_query_pkey)
COMPAT_INT(ibv_query_port)
COMPAT_INT(ibv_query_qp)
COMPAT_INT(ibv_query_srq)
COMPAT_PTR(ibv_reg_mr)
COMPAT_INT(ibv_resize_cq)

// Provider registration of libibverbs 1.1 (before the PRIVATE interface):
// compat only, no default version. There are no providers to register.
SV_EXPORT __attribute__((symver("ibv_register_driver@IBVERBS_1.1"))) void sv_compat_ibv_register_driver(const char*,
                                                                                                  void*) {}
