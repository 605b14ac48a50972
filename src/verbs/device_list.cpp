// Device discovery and contexts: ibv_get_device_list, ibv_open_device, ...
#include <endian.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "core/context.h"
#include "core/device_profile.h"
#include "core/check.h"
#include "core/faults.h"
#include "core/trace.h"
#include "shm/registry.h"
#include "transport/roce_transport.h"
#include "transport/shm_transport.h"
#include "util/knobs.h"
#include "verbs/abi.h"
#include "verbs/device.h"
#include "verbs/sysfs_view.h"

namespace sv::abi {
namespace {

struct ProviderName {
  const char* name;  // what rdma-core's verbs_device_ops starts with
};
const ProviderName kOps{"softverbs"};

}  // namespace

Transport* process_network() {
  static RoceTransport* t = new RoceTransport();  // never destroyed: the network thread may outlive main()
  return t;
}

ibv_device* the_device() {
  static DeviceHandle* handle = [] {
    auto* h = new DeviceHandle{};
    ibv_device& d = h->dev;
    d.node_type = IBV_NODE_CA;
    d.transport_type = IBV_TRANSPORT_IB;
    std::snprintf(d.name, sizeof d.name, "%s", knobs().device_name.c_str());
    std::snprintf(d.dev_name, sizeof d.dev_name, "uverbs0");
    // As rdma-core: under the sysfs root the library reports (sysfs_view.h).
    const char* sysfs = sysfs_root().c_str();
    std::snprintf(d.dev_path, sizeof d.dev_path, "%s/class/infiniband_verbs/uverbs0", sysfs);
    std::snprintf(d.ibdev_path, sizeof d.ibdev_path, "%s/class/infiniband/%s", sysfs, d.name);
    h->ops = &kOps;
    h->refcount = 1;
    return h;
  }();
  return &handle->dev;
}

}  // namespace sv::abi

using namespace sv;

SV_EXPORT_1_1(ibv_get_device_list) ibv_device** sv_ibv_get_device_list(int* num_devices) {
  // Taking the device list is when programs look at sysfs: bring the view's
  // GID files up to date with the host's addresses, as the kernel keeps them.
  abi::refresh_sysfs_view();
  auto** list = static_cast<ibv_device**>(std::calloc(2, sizeof(ibv_device*)));
  if (!list) return abi::fail_null<ibv_device*>(ENOMEM);
  // A SOFTVERBS_PROFILE that names no device, SOFTVERBS_FAULTS that do not
  // parse (the reason logged once): none is listed, rather than a device
  // other than the one asked for, or one that injects other faults.
  const bool profile_ok = device_profile_or_null() != nullptr;
  check::load();
  trace::load();
  // As rdma-core's ibverbs_init: these ask for ibv_fork_init().
  static const bool fork_safe = (std::getenv("RDMAV_FORK_SAFE") || std::getenv("IBV_FORK_SAFE")) && ibv_fork_init() == 0;
  (void)fork_safe;
  const bool listed = faults::load() && profile_ok;
  list[0] = listed ? abi::the_device() : nullptr;
  if (num_devices) *num_devices = listed ? 1 : 0;
  return list;
}

SV_EXPORT_1_1(ibv_free_device_list) void sv_ibv_free_device_list(ibv_device** list) { std::free(list); }

SV_EXPORT_1_1(ibv_get_device_name) const char* sv_ibv_get_device_name(ibv_device* device) { return device ? device->name : nullptr; }

SV_EXPORT_1_1(ibv_get_device_guid) __be64 sv_ibv_get_device_guid(ibv_device* device) { return htobe64(shm::host_node_guid()); }

SV_EXPORT int ibv_get_device_index(ibv_device* device) { return device == abi::the_device() ? 0 : -1; }

SV_EXPORT_1_1(ibv_open_device) ibv_context* sv_ibv_open_device(ibv_device* device) {
  if (device != abi::the_device()) return abi::fail_null<ibv_context>(ENODEV);
  return abi::guarded<ibv_context*>(nullptr, [&]() -> ibv_context* {
    Context* ctx = Context::create(device);
    if (!ctx) return nullptr;
    ctx->remote_transport = abi::process_network();
    Context::make_local_transport = [](Context* c) -> Transport* {
      return new ShmTransport(*c->host, c->remote_transport);
    };
    ctx->local_transport = Context::make_local_transport(ctx);
    abi::install_context_ops(ctx->ibv());
    return ctx->ibv();
  });
}

SV_EXPORT_1_1(ibv_close_device) int sv_ibv_close_device(ibv_context* context) {
  Context* ctx = Context::from(context);
  delete ctx->local_transport;
  ctx->destroy();
  return 0;
}

