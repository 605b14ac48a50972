// rdma_get_devices / rdma_free_devices: every verbs device, opened.
//
// As in rdma-core, the result is a NULL-terminated array of the connection
// manager's own contexts (the ones ids bind to, id->verbs), which stay open
// for the life of the library: rdma_free_devices frees the array only.
// Middleware relies on that: libfabric's verbs provider frees the array and
// keeps allocating PDs and registering memory on the contexts it held.
// No devices at all is reported as NULL with errno ENODEV.
#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstdlib>

#include "c_boundary.h"
#include "cm_device.h"

using namespace sv::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT struct ibv_context** rdma_get_devices(int* num_devices) {
  if (num_devices) *num_devices = 0;
  return guarded<ibv_context**>(nullptr, [num_devices]() -> ibv_context** {
    const int count = device_count();
    // rdma-core reports both "no verbs support" and "no devices" as ENODEV.
    if (count <= 0) return fail_null<ibv_context*>(ENODEV);

    // malloc'ed (not new[]) so the array is plain C memory for the caller.
    auto** contexts = static_cast<ibv_context**>(std::calloc(static_cast<std::size_t>(count) + 1,
                                                             sizeof(ibv_context*)));
    if (!contexts) return fail_null<ibv_context*>(ENOMEM);
    for (int i = 0; i < count; ++i) contexts[i] = device_context(i);
    if (num_devices) *num_devices = count;
    return contexts;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT void rdma_free_devices(struct ibv_context** list) { std::free(list); }
