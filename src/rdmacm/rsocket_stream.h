// rsockets, stream sockets: the engine behind the entry points.
//   rsocket_endpoint.cpp  PD, CQ, QP, rings; the private data
//   rsocket_progress.cpp  completions, CM events, credits, sleeping
//   rsocket_stream_io.cpp sending and receiving bytes
// Every function here is called with rs.mutex held (the `lock` argument,
// where there is one, is that lock: it is dropped while sleeping).
#pragma once

#include <poll.h>
#include <sys/uio.h>

#include <cerrno>
#include <chrono>
#include <mutex>

#include "rsocket_state.h"

namespace sv::rdmacm::rs {

using Lock = std::unique_lock<std::mutex>;

// Inline sends are gathered on the stack first: at most this many bytes.
inline constexpr uint32_t kMaxInline = 1024;

// --- endpoint (rsocket_endpoint.cpp) ---
// Creates the PD, CQ (with a non-blocking completion channel), QP, send
// staging buffer and receive ring of `id`, and posts the receive WRs.
int create_endpoint(RSocket& rs, rdma_cm_id* id);  // 0, or -1 with errno
void destroy_endpoint(RSocket& rs);
ConnData local_conn_data(const RSocket& rs);
// Starts the data path with what the peer said in its private data.
int start_session(RSocket& rs, const void* private_data, size_t len);  // 0 / -1 errno

// --- progress (rsocket_progress.cpp) ---
// Polls the CQ and acts on what completed; sends credit grants that are due.
void poll_cq(RSocket& rs);
// Sends the credit grants that are due (as many as credits allow).
void send_grants(RSocket& rs);
// Retrieves and handles the socket's pending CM events without blocking.
void pump_cm(RSocket& rs);
// pump_cm when `check_cm` or when the CM was not looked at for a while (a
// peer that vanished shows only there), then poll_cq.
void progress(RSocket& rs, bool check_cm);
// Consumes the completion events the channel fd signalled.
void consume_cq_events(RSocket& rs);
// Requests a completion event for the next completion.
void arm_cq(RSocket& rs);
// The fds that become readable when this socket may have progressed.
int sleep_fds(const RSocket& rs, pollfd* out);  // up to 2
// Posts a control message (zero-length WRITE WITH IMM); needs a message
// credit and a send slot (can_send_ctrl).
int post_ctrl(RSocket& rs, Op op, uint32_t arg);
bool can_send_ctrl(const RSocket& rs);
// `want` stream bytes (some of them) may be posted now: slots, credits,
// ring space, and staging room (or inline room for all of them).
bool can_send_data(const RSocket& rs, size_t want);
// The connection is over in the sending direction (error or peer gone).
bool send_side_closed(const RSocket& rs);
int send_error(const RSocket& rs);  // EPIPE / ECONNRESET / ENOTCONN

// Drives a connect or accept to its end: 0 once connected, -1 with errno
// (EINPROGRESS/EAGAIN when non-blocking and not there yet, the failure).
int drive_connection(RSocket& rs, Lock& lock, bool nonblock);

// Sleeps until `ready()` holds: 0, or -1 with EAGAIN when `nonblock`, or
// ETIMEDOUT after `timeout_ms` (-1: none).
template <class Ready>
int wait_until(RSocket& rs, Lock& lock, bool nonblock, Ready ready, int timeout_ms = -1);

// Readiness for rpoll: POLLIN/POLLOUT/POLLHUP/POLLERR as they apply.
short stream_revents(RSocket& rs, short events);

// --- data (rsocket_stream_io.cpp) ---
ssize_t stream_send(RSocket& rs, const struct iovec* iov, int iovcnt, int flags);
ssize_t stream_recv(RSocket& rs, const struct iovec* iov, int iovcnt, int flags);
int stream_shutdown(RSocket& rs, int how);
void stream_close(RSocket& rs);

// Implementation of the template (needs sleep helpers).
void sleep_once(RSocket& rs, Lock& lock, int timeout_ms);

template <class Ready>
int wait_until(RSocket& rs, Lock& lock, bool nonblock, Ready ready, int timeout_ms) {
  const uint64_t start = now_ns();
  const uint64_t deadline = timeout_ms < 0 ? 0 : start + uint64_t(timeout_ms) * 1000000;
  const uint64_t spin_ns = uint64_t(defaults().polling_time_us) * 1000;
  for (;;) {
    if (rs.closed) {
      errno = EBADF;
      return -1;
    }
    progress(rs, false);  // looks at the CM now and then: a vanished peer shows only there
    if (ready()) return 0;
    if (nonblock) {
      errno = EAGAIN;
      return -1;
    }
    // As rdma-core: poll for polling_time before sleeping, so that a quick
    // answer costs no wake-up.
    if (now_ns() - start < spin_ns) continue;
    int left = -1;
    if (deadline) {
      uint64_t now = now_ns();
      if (now >= deadline) {
        errno = ETIMEDOUT;
        return -1;
      }
      left = static_cast<int>((deadline - now) / 1000000) + 1;
    }
    if (rs.sleeper) {
      rs.wakeup.wait_for(lock, std::chrono::milliseconds(left < 0 ? 1000 : left));
      continue;
    }
    arm_cq(rs);
    progress(rs, true);
    if (ready()) return 0;
    sleep_once(rs, lock, left);
  }
}

}  // namespace sv::rdmacm::rs
