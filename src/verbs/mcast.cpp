// Multicast attach/detach. Multicast delivery is not implemented yet, so the
// device reports max_mcast_grp = 0 and refuses attaching.
#include "verbs/abi.h"

SV_EXPORT int sv_ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) { return EOPNOTSUPP; }
SV_DEFAULT_1_1(ibv_attach_mcast)

SV_EXPORT int sv_ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) { return EOPNOTSUPP; }
SV_DEFAULT_1_1(ibv_detach_mcast)
