// rdma_create_event_channel / rdma_destroy_event_channel.
//
// A channel is a real, pollable file descriptor (an eventfd, close-on-exec,
// blocking like rdma-core's /dev/infiniband/rdma_cm fd). Nothing signals it
// yet: with no connection management there are no events, so the fd never
// becomes readable, which is exactly what poll()/select() callers expect.
#include <rdma/rdma_cma.h>

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <memory>
#include <new>

#include "c_boundary.hpp"

using namespace softverbs::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT struct rdma_event_channel* rdma_create_event_channel(void) {
  return guarded<rdma_event_channel*>(nullptr, []() -> rdma_event_channel* {
    auto channel = std::unique_ptr<rdma_event_channel>(new (std::nothrow) rdma_event_channel{});
    if (!channel) return fail_null<rdma_event_channel>(ENOMEM);
    channel->fd = eventfd(0, EFD_CLOEXEC);
    if (channel->fd < 0) return nullptr;  // errno from eventfd
    return channel.release();
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel* channel) {
  if (!channel) return;
  const int saved_errno = errno;
  if (channel->fd >= 0) close(channel->fd);
  delete channel;
  errno = saved_errno;
}
