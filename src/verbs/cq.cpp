// Completion queues and completion channels.
#include "core/channel.h"
#include "core/cq.h"
#include "verbs/abi.h"

using namespace sv;

namespace sv::abi {

// (A negative count is ibv_poll_cq's failure; errno ENOMEM should anything throw.)
int poll_cq_op(ibv_cq* cq, int n, ibv_wc* wc) {
  return guarded<int>(-1, [&] { return poll_cq(Cq::from(cq), n, wc); });
}
int req_notify_cq_op(ibv_cq* cq, int solicited_only) { return req_notify_cq(Cq::from(cq), solicited_only); }

ibv_cq_ex* create_cq_ex_op(ibv_context* context, ibv_cq_init_attr_ex* a) {
  constexpr uint32_t kKnownMask = IBV_CQ_INIT_ATTR_MASK_FLAGS | IBV_CQ_INIT_ATTR_MASK_PD;
  if (a->comp_mask & ~kKnownMask) return fail_null<ibv_cq_ex>(EINVAL);
  if ((a->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD) && a->parent_domain) return fail_null<ibv_cq_ex>(EOPNOTSUPP);
  if (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) {
    if (a->flags & ~(IBV_CREATE_CQ_ATTR_SINGLE_THREADED | IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN))
      return fail_null<ibv_cq_ex>(EINVAL);
    if (a->flags & IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN) return fail_null<ibv_cq_ex>(EOPNOTSUPP);
    // SINGLE_THREADED is a hint: the CQ stays safe for threads regardless
    // (SOFTVERBS_CHECK reports two pollers at once: single-thread-cq).
  }
  return guarded<ibv_cq_ex*>(nullptr, [&]() -> ibv_cq_ex* {
    Cq* cq = create_cq(Context::from(context), static_cast<int>(a->cqe), a->cq_context,
                       a->channel ? Channel::from(a->channel) : nullptr, static_cast<int>(a->comp_vector),
                       a->wc_flags);
    if (cq && (a->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) && (a->flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED))
      cq->single_threaded = true;
    return cq;
  });
}

}  // namespace sv::abi

SV_EXPORT_1_1(ibv_create_cq) ibv_cq* sv_ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                                   int comp_vector) {
  return abi::guarded<ibv_cq*>(nullptr, [&]() -> ibv_cq* {
    Cq* cq = create_cq(Context::from(context), cqe, cq_context, channel ? Channel::from(channel) : nullptr,
                       comp_vector, IBV_WC_STANDARD_FLAGS);
    return cq ? cq->ibv() : nullptr;
  });
}

SV_EXPORT_1_1(ibv_destroy_cq) int sv_ibv_destroy_cq(ibv_cq* cq) { return destroy_cq(Cq::from(cq)); }

SV_EXPORT_1_1(ibv_resize_cq) int sv_ibv_resize_cq(ibv_cq* cq, int cqe) {
  return abi::guarded<int>(ENOMEM, [&] { return resize_cq(Cq::from(cq), cqe); });
}

SV_EXPORT ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  return abi::guarded<ibv_comp_channel*>(nullptr, [&]() -> ibv_comp_channel* {
    return create_channel(Context::from(context));
  });
}

SV_EXPORT int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  int rc = destroy_channel(Channel::from(channel));
  if (rc) {
    errno = rc;
    return -1;
  }
  return 0;
}

SV_EXPORT_1_1(ibv_get_cq_event) int sv_ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  Cq* out = nullptr;
  int rc = get_cq_event(Channel::from(channel), &out, cq_context);
  if (rc == 0) *cq = out->ibv();
  return rc;
}

SV_EXPORT_1_1(ibv_ack_cq_events) void sv_ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) { ack_cq_events(Cq::from(cq), nevents); }
