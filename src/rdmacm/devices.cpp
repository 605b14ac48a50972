// rdma_get_devices / rdma_free_devices: every verbs device, opened.
//
// Like rdma-core, the result is a NULL-terminated array of ibv_context*
// (pyverbs reads ->device->name from it), and no devices at all (or a
// failing ibv_get_device_list) is reported as NULL with errno ENODEV.
// Unlike rdma-core, which keeps its contexts open for the life of the
// process, the contexts belong to the array: rdma_free_devices closes them.
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdlib>
#include <memory>

#include "c_boundary.hpp"

using namespace softverbs::rdmacm;

namespace {

struct DeviceListFree {
  void operator()(ibv_device** list) const noexcept { ibv_free_device_list(list); }
};
using DeviceList = std::unique_ptr<ibv_device*[], DeviceListFree>;

}  // namespace

extern "C" SOFTVERBS_RDMACM_EXPORT struct ibv_context** rdma_get_devices(int* num_devices) {
  if (num_devices) *num_devices = 0;
  return guarded<ibv_context**>(nullptr, [num_devices]() -> ibv_context** {
    int count = 0;
    DeviceList devices{ibv_get_device_list(&count)};
    // rdma-core reports both "no verbs support" and "no devices" as ENODEV.
    if (!devices || count <= 0) return fail_null<ibv_context*>(ENODEV);

    // malloc'ed (not new[]) so the array is plain C memory for the caller.
    auto** contexts = static_cast<ibv_context**>(std::calloc(static_cast<std::size_t>(count) + 1,
                                                             sizeof(ibv_context*)));
    if (!contexts) return fail_null<ibv_context*>(ENOMEM);

    // A device that cannot be opened is skipped (rdma-core stops at the
    // first one; either way the array holds only usable contexts).
    int opened = 0;
    for (int i = 0; i < count; ++i) {
      if (ibv_context* context = ibv_open_device(devices[i])) contexts[opened++] = context;
    }
    contexts[opened] = nullptr;
    if (num_devices) *num_devices = opened;
    return contexts;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT void rdma_free_devices(struct ibv_context** list) {
  if (!list) return;
  const int saved_errno = errno;
  for (ibv_context** context = list; *context; ++context) ibv_close_device(*context);
  std::free(list);
  errno = saved_errno;
}
