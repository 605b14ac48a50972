// The one device this library offers, laid out as libibverbs' verbs_device
// so that provider libraries (libmlx5, libefa) that inspect it see a device
// that is not theirs.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>
#include "util/private_heap.h"

namespace sv {
class Transport;
}

namespace sv::abi {

struct DeviceHandle : PrivateHeapObject {
  ibv_device dev;
  // The fields of rdma-core's struct verbs_device that follow ibv_device.
  // mlx5dv_*/efadv_* compare `ops` with their own to recognise their devices.
  const void* ops;
  int refcount;
  void* list_next;
  void* list_prev;
  void* sysfs;
  uint64_t core_support;
};
static_assert(sizeof(ibv_device) == 664);
static_assert(offsetof(DeviceHandle, ops) == 664);

ibv_device* the_device();
// The process's network transport (RoCEv2), shared by its contexts.
Transport* process_network();
void install_context_ops(ibv_context* ctx);

}  // namespace sv::abi
