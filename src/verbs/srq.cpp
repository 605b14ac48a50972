// Shared receive queues.
#include "core/cq.h"
#include "core/srq.h"
#include "core/xrcd.h"
#include "util/raw_enum.h"
#include "verbs/abi.h"

using namespace sv;

namespace sv::abi {

int post_srq_recv_op(ibv_srq* srq, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  return guarded_post(wr, bad, [&] { return post_srq_recv(Srq::from(srq), wr, bad); });
}

ibv_srq* create_srq_ex_op(ibv_context* context, ibv_srq_init_attr_ex* a) {
  constexpr uint32_t kKnown = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD | IBV_SRQ_INIT_ATTR_XRCD |
                              IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_TM;
  if (a->comp_mask & ~kKnown) return fail_null<ibv_srq>(EINVAL);
  if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_PD) || !a->pd) return fail_null<ibv_srq>(EINVAL);
  int type = (a->comp_mask & IBV_SRQ_INIT_ATTR_TYPE) ? raw_enum(a->srq_type) : IBV_SRQT_BASIC;
  if (type == IBV_SRQT_TM) return fail_null<ibv_srq>(EOPNOTSUPP);
  if (type != IBV_SRQT_BASIC && type != IBV_SRQT_XRC) return fail_null<ibv_srq>(EINVAL);
  // An XRC SRQ needs its domain and the CQ its receive completions go to.
  Xrcd* xrcd = nullptr;
  Cq* cq = nullptr;
  if (type == IBV_SRQT_XRC) {
    if (!(a->comp_mask & IBV_SRQ_INIT_ATTR_XRCD) || !a->xrcd || !(a->comp_mask & IBV_SRQ_INIT_ATTR_CQ) || !a->cq ||
        a->xrcd->context != context || a->cq->context != context)
      return fail_null<ibv_srq>(EINVAL);
    xrcd = Xrcd::from(a->xrcd);
    cq = Cq::from(a->cq);
  }
  ibv_srq_init_attr basic{a->srq_context, a->attr};
  ibv_srq* srq =
      guarded<ibv_srq*>(nullptr, [&]() -> ibv_srq* { return create_srq(Pd::from(a->pd), &basic, xrcd, cq); });
  if (srq) a->attr = basic.attr;
  return srq;
}

}  // namespace sv::abi

SV_EXPORT_1_1(ibv_create_srq) ibv_srq* sv_ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* attr) {
  return abi::guarded<ibv_srq*>(nullptr, [&]() -> ibv_srq* { return create_srq(Pd::from(pd), attr); });
}

SV_EXPORT_1_1(ibv_modify_srq) int sv_ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* attr, int mask) {
  return modify_srq(Srq::from(srq), attr, mask);
}

SV_EXPORT_1_1(ibv_query_srq) int sv_ibv_query_srq(ibv_srq* srq, ibv_srq_attr* attr) { return query_srq(Srq::from(srq), attr); }

SV_EXPORT_1_1(ibv_destroy_srq) int sv_ibv_destroy_srq(ibv_srq* srq) { return destroy_srq(Srq::from(srq)); }
