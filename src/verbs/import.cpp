// Import and export: ibv_import_device on a context's cmd_fd, and
// ibv_import_pd / _mr / _dm by handle (core/handles.h says what is shared).
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>

#include "core/context.h"
#include "core/dm.h"
#include "core/mr.h"
#include "core/pd.h"
#include "transport/roce_transport.h"
#include "transport/shm_transport.h"
#include "util/log.h"
#include "verbs/abi.h"
#include "verbs/device.h"

using namespace sv;

namespace {

bool same_file(int a, int b) {
  struct stat sa, sb;
  return fstat(a, &sa) == 0 && fstat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

// A softverbs cmd_fd names its process's arena (a memfd of that name).
bool is_softverbs_cmd_fd(int fd) {
  char path[64], target[PATH_MAX];
  std::snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(path, target, sizeof target - 1);
  if (n <= 0) return false;
  target[n] = 0;
  return std::strstr(target, "memfd:softverbs-arena") != nullptr;
}

}  // namespace

// The new context takes cmd_fd over (ibv_close_device closes it), as
// rdma-core's does. A cmd_fd of this process gives a context on the same
// objects; one from another process (passed over a socket) names objects in
// another address space, which this device cannot import yet.
SV_EXPORT ibv_context* ibv_import_device(int cmd_fd) {
  struct stat st;
  if (fstat(cmd_fd, &st) != 0) return abi::fail_null<ibv_context>(EINVAL);
  return abi::guarded<ibv_context*>(nullptr, [&]() -> ibv_context* {
    shm::Host* host = shm::Host::get();
    if (!host) return nullptr;
    if (!same_file(cmd_fd, host->arena().fd())) {
      bool ours = is_softverbs_cmd_fd(cmd_fd);
      SV_INFO("import_device: fd %d is %s", cmd_fd,
              ours ? "the context of another process (not supported yet)" : "not a softverbs context");
      errno = ours ? EOPNOTSUPP : ENODEV;
      return nullptr;
    }
    Context* ctx = Context::create(abi::the_device());
    if (!ctx) return nullptr;
    ::close(ctx->context.cmd_fd);
    ctx->context.cmd_fd = cmd_fd;
    ctx->remote_transport = abi::process_network();
    Context::make_local_transport = [](Context* c) -> Transport* {
      return new ShmTransport(*c->host, c->remote_transport);
    };
    ctx->local_transport = Context::make_local_transport(ctx);
    abi::install_context_ops(ctx->ibv());
    return ctx->ibv();
  });
}

SV_EXPORT ibv_pd* ibv_import_pd(ibv_context* context, uint32_t pd_handle) {
  if (!context) return abi::fail_null<ibv_pd>(EINVAL);
  return abi::guarded<ibv_pd*>(nullptr, [&] { return static_cast<ibv_pd*>(import_pd(Context::from(context), pd_handle)); });
}

SV_EXPORT void ibv_unimport_pd(ibv_pd* pd) {
  if (pd) unimport_pd(Pd::from(pd));
}

SV_EXPORT ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t mr_handle) {
  if (!pd) return abi::fail_null<ibv_mr>(EINVAL);
  return abi::guarded<ibv_mr*>(nullptr, [&] { return static_cast<ibv_mr*>(import_mr(Pd::from(pd), mr_handle)); });
}

SV_EXPORT void ibv_unimport_mr(ibv_mr* mr) {
  if (mr) unimport_mr(Mr::from(mr));
}

SV_EXPORT ibv_dm* ibv_import_dm(ibv_context* context, uint32_t dm_handle) {
  if (!context) return abi::fail_null<ibv_dm>(EINVAL);
  return abi::guarded<ibv_dm*>(nullptr, [&] { return static_cast<ibv_dm*>(import_dm(Context::from(context), dm_handle)); });
}

SV_EXPORT void ibv_unimport_dm(ibv_dm* dm) {
  if (dm) unimport_dm(Dm::from(dm));
}
