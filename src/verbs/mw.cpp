// Memory windows: operations of ibv_context_ops, reached through the inline
// ibv_alloc_mw, ibv_bind_mw and ibv_dealloc_mw of <infiniband/verbs.h>.
#include "core/mw.h"
#include "core/qp.h"
#include "verbs/abi.h"

namespace sv::abi {

ibv_mw* alloc_mw_op(ibv_pd* pd, ibv_mw_type type) {
  if (!pd) return fail_null<ibv_mw>(EINVAL);
  return guarded<ibv_mw*>(nullptr, [&] { return static_cast<ibv_mw*>(alloc_mw(Pd::from(pd), type)); });
}

int bind_mw_op(ibv_qp* qp, ibv_mw* mw, ibv_mw_bind* bind) {
  if (!qp || !mw || !bind) return EINVAL;
  return guarded<int>(EINVAL, [&] { return bind_mw_type1(Qp::from(qp), Mw::from(mw), *bind); });
}

int dealloc_mw_op(ibv_mw* mw) {
  if (!mw) return EINVAL;
  return dealloc_mw(Mw::from(mw));
}

}  // namespace sv::abi
