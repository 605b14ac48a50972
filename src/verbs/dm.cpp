// Device memory and MR advice: operations of verbs_context (reached through
// the inline verbs of <infiniband/verbs.h>: ibv_alloc_dm, ibv_free_dm,
// ibv_reg_dm_mr, ibv_advise_mr).
#include "core/dm.h"
#include "core/mr.h"
#include "core/pd.h"
#include "verbs/abi.h"

namespace sv::abi {

ibv_dm* alloc_dm_op(ibv_context* ctx, ibv_alloc_dm_attr* attr) {
  if (!attr) return fail_null<ibv_dm>(EINVAL);
  return guarded<ibv_dm*>(nullptr, [&] { return static_cast<ibv_dm*>(alloc_dm(Context::from(ctx), *attr)); });
}

int free_dm_op(ibv_dm* dm) { return free_dm(Dm::from(dm)); }

ibv_mr* reg_dm_mr_op(ibv_pd* pd, ibv_dm* dm, uint64_t dm_offset, size_t length, unsigned int access) {
  if (!dm) return fail_null<ibv_mr>(EINVAL);
  return guarded<ibv_mr*>(nullptr, [&] {
    return static_cast<ibv_mr*>(reg_dm_mr(Pd::from(pd), Dm::from(dm), dm_offset, length, access));
  });
}

int advise_mr_op(ibv_pd* pd, ibv_advise_mr_advice advice, uint32_t flags, ibv_sge* sg_list, uint32_t num_sge) {
  return advise_mr(Pd::from(pd), advice, flags, sg_list, num_sge);
}

}  // namespace sv::abi
