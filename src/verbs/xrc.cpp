// XRC: domains, SRQ numbers and opened QPs (operations of verbs_context,
// reached through ibv_open_xrcd, ibv_close_xrcd, ibv_get_srq_num and
// ibv_open_qp of <infiniband/verbs.h>).
#include "core/qp.h"
#include "core/srq.h"
#include "core/xrcd.h"
#include "verbs/abi.h"

namespace sv::abi {

ibv_xrcd* open_xrcd_op(ibv_context* ctx, ibv_xrcd_init_attr* attr) {
  if (!attr) return fail_null<ibv_xrcd>(EINVAL);
  return guarded<ibv_xrcd*>(nullptr, [&]() -> ibv_xrcd* {
    Xrcd* x = open_xrcd(Context::from(ctx), *attr);
    return x ? x->ibv() : nullptr;
  });
}

int close_xrcd_op(ibv_xrcd* xrcd) { return xrcd ? close_xrcd(Xrcd::from(xrcd)) : EINVAL; }

int get_srq_num_op(ibv_srq* srq, uint32_t* srq_num) {
  if (!srq || !srq_num) return EINVAL;
  *srq_num = Srq::from(srq)->srqn;
  return 0;
}

ibv_qp* open_qp_op(ibv_context* ctx, ibv_qp_open_attr* attr) {
  if (!attr) return fail_null<ibv_qp>(EINVAL);
  return guarded<ibv_qp*>(nullptr, [&]() -> ibv_qp* {
    Qp* qp = open_qp(Context::from(ctx), *attr);
    return qp ? qp->ibv() : nullptr;
  });
}

}  // namespace sv::abi
