#include "shm/host_service.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/host_service_socket.h"
#include "util/log.h"

namespace sv::shm {

std::unique_ptr<HostService> HostService::connect() {
  uint32_t untrusted;
  const int fd = connect_host_service(&untrusted);
  if (fd < 0) {
    // Whoever binds the name first would get our lease requests and could
    // feed us packets: only a uid we trust is the service.
    if (untrusted != UINT32_MAX)
      SV_WARN("the host service socket @%s is held by uid %u, which is neither root nor SOFTVERBS_HOSTD_UID (%u): "
              "ignored; this process works without the service",
              kHostServiceSocket, untrusted, host_service_uid());
    return nullptr;
  }
  int size = 4 << 20;  // a burst of datagrams waits here for the network thread
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  return std::unique_ptr<HostService>(new HostService(fd));
}

HostService::~HostService() {
  if (fd_ >= 0) ::close(fd_);
}

void HostService::abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool HostService::lease(uint32_t slot, uint32_t* holder) {
  *holder = UINT32_MAX;
  hostd::Lease req;
  req.slot = slot;
  if (::send(fd_, &req, sizeof req, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof req)) return false;
  // The answer comes before any datagram: none is sent to a process
  // without a slot.
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    const int n = poll(&p, 1, 5000);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      SV_WARN("the host service did not answer a slot lease in 5 s");
      return false;
    }
    hostd::LeaseReply rep;
    const ssize_t got = recv(fd_, &rep, sizeof rep, 0);
    if (got < 0 && errno == EINTR) continue;
    if (got != static_cast<ssize_t>(sizeof rep) || rep.type != hostd::kLeaseReply || rep.slot != slot) return false;
    if (!rep.granted) {
      *holder = rep.holder_uid;
      return false;
    }
    slot_ = slot;
    return true;
  }
}

bool HostService::send(const hostd::DatagramHeader& h, const uint8_t* data, size_t len) {
  if (fd_ < 0) return false;
  hostd::DatagramHeader out = h;
  out.type = hostd::kSend;
  iovec iov[2] = {{&out, sizeof out}, {const_cast<uint8_t*>(data), len}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  for (;;) {
    const ssize_t n = sendmsg(fd_, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n >= 0) return true;
    if (errno != EINTR) return false;
  }
}

void HostService::network_up() {
  hostd::Notice n;
  n.type = hostd::kNetworkUp;
  if (fd_ >= 0) (void)!::send(fd_, &n, sizeof n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

ssize_t HostService::receive(uint8_t* buf, size_t cap, hostd::DatagramHeader* h) {
  if (fd_ < 0) {
    errno = EPIPE;
    return -1;
  }
  for (;;) {
    iovec iov[2] = {{h, sizeof *h}, {buf, cap}};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    const ssize_t n = recvmsg(fd_, &msg, MSG_DONTWAIT);
    if (n == 0) {
      errno = EPIPE;
      return -1;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (n < static_cast<ssize_t>(sizeof *h) || h->type != hostd::kDatagram || (msg.msg_flags & MSG_TRUNC)) continue;
    return n - static_cast<ssize_t>(sizeof *h);
  }
}

}  // namespace sv::shm
