// A REQ to a port of this host that an id has bound but not yet listens on.
// On a NIC the REQ reaches the remote CM only after address and route
// resolution, which take long enough that a server binding, telling its
// port to the client out of band and then calling rdma_listen (qperf does)
// is always listening in time; here resolution takes microseconds, so the
// REQ may come first. It waits for the listener, tried again on a timer, for
// as long as one REQ of the kernel's CM waits for its answer before it is
// retried (CMA_CM_RESPONSE_TIMEOUT 20: 4.096 us x 2^20, 4.3 s), however
// busy the machine. A port nobody holds is rejected at once (cm_connect.cpp).
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <cerrno>

#include "cm_address.h"
#include "cm_link.h"
#include "cm_protocol.h"
#include "cm_state.h"
#include "util/clock.h"

namespace sv::rdmacm {
namespace {

constexpr uint64_t kListenerWaitNs = 4'295'000'000ull;  // 4.096 us << 20
constexpr long kRetryEveryNs = 2'000'000;                // 2 ms: a listener is usually a moment away

}  // namespace

bool listener_port_held(const Id* id) {
  // Binding a name some id holds fails with EADDRINUSE; one nobody holds
  // binds (and is released at once). A connect cannot tell the two apart:
  // both are ECONNREFUSED.
  for (const std::string& name : listener_names(id->pub.ps, &id->pub.route.addr.dst_addr)) {
    int probe = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (probe < 0) return false;
    const bool held = try_bind(probe, name) != 0 && errno == EADDRINUSE;
    close(probe);
    if (held) return true;
  }
  return false;
}

int wait_for_listener(Id* id, const WireMessage& req) {
  id->waiting_req = req;
  id->listener_deadline_ns = sv::monotonic_ns() + kListenerWaitNs;
  id->listener_wait_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (id->listener_wait_fd < 0) return -1;
  itimerspec every{};
  every.it_value.tv_nsec = every.it_interval.tv_nsec = kRetryEveryNs;
  timerfd_settime(id->listener_wait_fd, 0, &every, nullptr);
  id->listener_wait_watch = watch_add(channel_of(id->pub.channel), WatchKind::kListenerWait, id->listener_wait_fd, id);
  if (!id->listener_wait_watch) {
    close(id->listener_wait_fd);
    id->listener_wait_fd = -1;
    return -1;
  }
  return 0;
}

void stop_waiting_for_listener(Id* id) {
  if (id->listener_wait_fd < 0) return;
  watch_remove(id->listener_wait_watch);
  close(id->listener_wait_fd);
  id->listener_wait_fd = -1;
}

void on_listener_wait_timer(Id* id) {
  uint64_t expirations;
  if (id->listener_wait_fd < 0 || read(id->listener_wait_fd, &expirations, sizeof expirations) < 0) return;
  if (id->state != IdState::kConnectSent) {  // the application gave up (rdma_disconnect)
    stop_waiting_for_listener(id);
    return;
  }
  if (link_connect(id) == 0) {
    stop_waiting_for_listener(id);
    if (send_message(id, id->waiting_req) != 0) reject_unanswered(id);
    return;
  }
  // Still bound and within the deadline: wait on; else as for no listener.
  if (errno == ECONNREFUSED && listener_port_held(id) && sv::monotonic_ns() < id->listener_deadline_ns) return;
  stop_waiting_for_listener(id);
  reject_unanswered(id);
}

}  // namespace sv::rdmacm
