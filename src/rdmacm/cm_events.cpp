// Retrieving and acknowledging CM events. Not implemented yet: with no
// connection management there is nothing to deliver, so both calls fail
// with EOPNOTSUPP rather than block forever.
#include <rdma/rdma_cma.h>

#include "c_boundary.hpp"

using namespace softverbs::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_get_cm_event(struct rdma_event_channel* channel,
                                                         struct rdma_cm_event** event) {
  return fail();
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_ack_cm_event(struct rdma_cm_event* event) {
  return fail();
}
