// rdma_event_str: the name of an rdma_cm_event_type, exactly as rdma-core's
// librdmacm spells it.
#include <rdma/rdma_cma.h>

#include <array>
#include <cstddef>

#include "c_boundary.h"

namespace {

// Indexed by enum rdma_cm_event_type (0 .. RDMA_CM_EVENT_TIMEWAIT_EXIT).
constexpr std::array<const char*, 16> kEventNames = {
    "RDMA_CM_EVENT_ADDR_RESOLVED",    "RDMA_CM_EVENT_ADDR_ERROR",
    "RDMA_CM_EVENT_ROUTE_RESOLVED",   "RDMA_CM_EVENT_ROUTE_ERROR",
    "RDMA_CM_EVENT_CONNECT_REQUEST",  "RDMA_CM_EVENT_CONNECT_RESPONSE",
    "RDMA_CM_EVENT_CONNECT_ERROR",    "RDMA_CM_EVENT_UNREACHABLE",
    "RDMA_CM_EVENT_REJECTED",         "RDMA_CM_EVENT_ESTABLISHED",
    "RDMA_CM_EVENT_DISCONNECTED",     "RDMA_CM_EVENT_DEVICE_REMOVAL",
    "RDMA_CM_EVENT_MULTICAST_JOIN",   "RDMA_CM_EVENT_MULTICAST_ERROR",
    "RDMA_CM_EVENT_ADDR_CHANGE",      "RDMA_CM_EVENT_TIMEWAIT_EXIT",
};
static_assert(RDMA_CM_EVENT_ADDR_RESOLVED == 0);
static_assert(RDMA_CM_EVENT_TIMEWAIT_EXIT + 1 == kEventNames.size(),
              "rdma_cm_event_type gained a value: extend kEventNames");

constexpr const char* kUnknownEvent = "UNKNOWN EVENT";

}  // namespace

extern "C" SOFTVERBS_RDMACM_EXPORT const char* rdma_event_str(enum rdma_cm_event_type event) {
  // Compare as unsigned so negative out-of-range values are rejected too.
  const auto index = static_cast<std::size_t>(static_cast<unsigned>(event));
  return index < kEventNames.size() ? kEventNames[index] : kUnknownEvent;
}
