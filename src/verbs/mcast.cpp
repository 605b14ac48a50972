// Multicast attach/detach (UD QPs; delivery to every attached QP of the host).
#include "core/multicast.h"
#include "core/qp.h"
#include "verbs/abi.h"

using namespace sv;

SV_EXPORT_1_1(ibv_attach_mcast) int sv_ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (!qp || !gid) return EINVAL;
  return attach_mcast(Qp::from(qp), *gid, lid);
}

SV_EXPORT_1_1(ibv_detach_mcast) int sv_ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) {
  if (!qp || !gid) return EINVAL;
  return detach_mcast(Qp::from(qp), *gid, lid);
}
