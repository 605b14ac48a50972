// rsockets: rpoll and rselect. An rsocket is ready when its own state says
// so (bytes in the ring, credit to send, a connection request, ...); to
// sleep, rpoll arms each rsocket's CQ and polls the real fds behind it (the
// completion channel, the CM channel, the UDP socket) together with the
// caller's ordinary fds. rdma-core polls for a short while first
// (polling_time, /etc/rdma/rsocket/polling_time); so do we.
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/select.h>

#include <memory>
#include <vector>

#include "c_boundary.h"
#include "rsocket_dgram.h"
#include "rsocket_stream.h"

using namespace sv::rdmacm;
using namespace sv::rdmacm::rs;

namespace {

short revents_of(RSocket& rs, short events) {
  if (rs.type == SOCK_DGRAM) return dgram_revents(rs, events);
  Lock lock(rs.mutex);
  if (rs.phase == Phase::kAccepting || rs.phase == Phase::kResolvingAddr ||
      rs.phase == Phase::kResolvingRoute || rs.phase == Phase::kConnecting)
    pump_cm(rs);
  return stream_revents(rs, events);
}

// One pass over every entry without sleeping; the number ready.
int check_all(pollfd* fds, nfds_t nfds, const std::vector<std::shared_ptr<RSocket>>& sockets,
              std::vector<pollfd>& plain) {
  int ready = 0;
  size_t p = 0;
  for (nfds_t i = 0; i < nfds; ++i) {
    if (sockets[i]) {
      fds[i].revents = revents_of(*sockets[i], fds[i].events);
      ready += fds[i].revents != 0;
    }
  }
  if (!plain.empty()) {
    poll(plain.data(), plain.size(), 0);
    for (nfds_t i = 0; i < nfds; ++i) {
      if (sockets[i]) continue;
      fds[i].revents = plain[p++].revents;
      ready += fds[i].revents != 0;
    }
  }
  return ready;
}

}  // namespace

extern "C" SOFTVERBS_RDMACM_EXPORT int rpoll(struct pollfd* fds, nfds_t nfds, int timeout) {
  if (!fds && nfds) return fail(EFAULT);
  return guarded(-1, [&]() -> int {
    std::vector<std::shared_ptr<RSocket>> sockets(nfds);
    std::vector<pollfd> plain;
    for (nfds_t i = 0; i < nfds; ++i) {
      fds[i].revents = 0;
      if (fds[i].fd < 0) continue;
      sockets[i] = lookup(fds[i].fd);
      if (!sockets[i]) plain.push_back(pollfd{fds[i].fd, fds[i].events, 0});
    }
    const uint64_t start = now_ns();
    const uint64_t spin_ns = uint64_t(defaults().polling_time_us) * 1000;
    for (;;) {
      int ready = check_all(fds, nfds, sockets, plain);
      if (ready || timeout == 0) return ready;
      uint64_t elapsed = now_ns() - start;
      if (timeout > 0 && elapsed >= uint64_t(timeout) * 1000000) return 0;
      if (elapsed < spin_ns) continue;

      // Arm, look again (a completion may have slipped in), then sleep.
      for (auto& rs : sockets) {
        if (!rs) continue;
        if (rs->type == SOCK_DGRAM) {
          dgram_arm(*rs);
        } else {
          Lock lock(rs->mutex);
          arm_cq(*rs);
        }
      }
      ready = check_all(fds, nfds, sockets, plain);
      if (ready) return ready;

      std::vector<pollfd> wait;
      std::vector<int> owner;  // index into fds, or -1
      for (nfds_t i = 0; i < nfds; ++i) {
        if (fds[i].fd < 0) continue;
        pollfd behind[2];
        int n;
        if (!sockets[i]) {
          behind[0] = pollfd{fds[i].fd, fds[i].events, 0};
          n = 1;
        } else if (sockets[i]->type == SOCK_DGRAM) {
          Lock lock(sockets[i]->mutex);
          n = dgram_sleep_fds(*sockets[i], behind);
        } else {
          Lock lock(sockets[i]->mutex);
          n = sleep_fds(*sockets[i], behind);
        }
        for (int k = 0; k < n; ++k) {
          wait.push_back(behind[k]);
          owner.push_back(static_cast<int>(i));
        }
      }
      int left = -1;
      if (timeout > 0) {
        uint64_t spent_ms = (now_ns() - start) / 1000000;
        left = spent_ms >= uint64_t(timeout) ? 0 : timeout - static_cast<int>(spent_ms);
      }
      int n = poll(wait.data(), wait.size(), left);
      if (n < 0) return -1;  // EINTR as poll
      // Consume the completion events that woke us.
      for (size_t k = 0; k < wait.size(); ++k) {
        if (!(wait[k].revents & POLLIN)) continue;
        auto& rs = sockets[owner[k]];
        if (!rs) continue;
        if (rs->type == SOCK_DGRAM) {
          dgram_woken(*rs);
        } else {
          Lock lock(rs->mutex);
          if (rs->comp_channel && wait[k].fd == rs->comp_channel->fd)
            consume_cq_events(*rs);
          else
            pump_cm(*rs);
        }
      }
      if (n == 0 && timeout > 0) return check_all(fds, nfds, sockets, plain);
    }
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rselect(int nfds, fd_set* readfds, fd_set* writefds,
                                               fd_set* exceptfds, struct timeval* timeout) {
  if (nfds < 0 || nfds > FD_SETSIZE) return fail(EINVAL);
  return guarded(-1, [&]() -> int {
    std::vector<pollfd> fds;
    for (int fd = 0; fd < nfds; ++fd) {
      short events = 0;
      if (readfds && FD_ISSET(fd, readfds)) events |= POLLIN;
      if (writefds && FD_ISSET(fd, writefds)) events |= POLLOUT;
      if (events || (exceptfds && FD_ISSET(fd, exceptfds))) fds.push_back(pollfd{fd, events, 0});
    }
    const int ms =
        timeout ? static_cast<int>(timeout->tv_sec * 1000 + timeout->tv_usec / 1000) : -1;
    int rc = rpoll(fds.data(), fds.size(), ms);
    if (rc < 0) return -1;
    if (readfds) FD_ZERO(readfds);
    if (writefds) FD_ZERO(writefds);
    if (exceptfds) FD_ZERO(exceptfds);
    int count = 0;
    for (const pollfd& p : fds) {
      if (readfds && (p.events & POLLIN) && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
        FD_SET(p.fd, readfds);
        ++count;
      }
      if (writefds && (p.events & POLLOUT) && (p.revents & (POLLOUT | POLLERR))) {
        FD_SET(p.fd, writefds);
        ++count;
      }
      if (exceptfds && (p.revents & POLLPRI)) {
        FD_SET(p.fd, exceptfds);
        ++count;
      }
    }
    return count;
  });
}
