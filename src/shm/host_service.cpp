#include "shm/host_service.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "util/fd_passing.h"
#include "util/host_service_socket.h"
#include "util/log.h"

namespace sv::shm {

std::unique_ptr<HostService> HostService::connect(bool* unreachable) {
  *unreachable = false;
  uint32_t untrusted;
  const int fd = connect_host_service(&untrusted);
  if (fd < 0) {
    // Whoever binds the name first would get our lease requests and could
    // feed us packets: only a uid we trust is the service.
    if (untrusted != UINT32_MAX)
      SV_WARN("the host service socket @%s is held by uid %u, which is neither root nor SOFTVERBS_HOSTD_UID (%u): "
              "ignored; this process works without the service",
              kHostServiceSocket, untrusted, host_service_uid());
    if (errno == ETIMEDOUT) {
      SV_ERROR("the host service (@%s) did not take our connection in %d ms: it is overloaded or stuck",
               kHostServiceSocket, kHostServiceConnectMs);
      *unreachable = true;
    }
    return nullptr;
  }
  int size = 4 << 20;  // a burst of datagrams waits here for the network thread
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  return std::unique_ptr<HostService>(new HostService(fd, host_service_uid()));
}

HostService::~HostService() {
  if (fd_ >= 0) ::close(fd_);
  if (steered4_ >= 0) ::close(steered4_);
  if (steered6_ >= 0) ::close(steered6_);
  if (table_) munmap(const_cast<PortAttestationTable*>(table_), sizeof *table_);
}

int HostService::take_steered_socket(bool v4) { return std::exchange(v4 ? steered4_ : steered6_, -1); }

// The message that follows a granted lease (hostd::Sockets).
bool HostService::receive_sockets() {
  pollfd p{fd_, POLLIN, 0};
  if (poll(&p, 1, 5000) <= 0) {
    SV_WARN("the host service sent no sockets after our lease");
    return false;
  }
  hostd::Sockets m;
  int fds[3];
  int count = 0;
  const ssize_t n = receive_with_fds(fd_, &m, sizeof m, fds, 3, &count);
  const int want = 1 + (m.v4 ? 1 : 0) + (m.v6 ? 1 : 0);
  if (n != static_cast<ssize_t>(sizeof m) || m.type != hostd::kSockets || count != want) {
    for (int i = 0; i < count; ++i) ::close(fds[i]);
    SV_WARN("the host service's sockets message was not one (%zd bytes, %d descriptors)", n, count);
    return false;
  }
  void* t = mmap(nullptr, sizeof(PortAttestationTable), PROT_READ, MAP_SHARED, fds[0], 0);
  ::close(fds[0]);
  if (t != MAP_FAILED) table_ = static_cast<const PortAttestationTable*>(t);
  int next = 1;
  if (m.v4) steered4_ = fds[next++];
  if (m.v6) steered6_ = fds[next++];
  steered_ = m.steered != 0;
  return table_ != nullptr;
}

bool HostService::rejoin(uint32_t slot, int member4, int member6, int send4, int send6, bool* refused) {
  *refused = false;
  uint32_t untrusted;
  const int fd = connect_host_service(&untrusted, trusted_uid_);
  if (fd < 0) return false;
  hostd::Rejoin m;
  m.slot = slot;
  int fds[4];
  int count = 0;
  for (auto [sock, flag] : {std::pair{member4, &m.member4}, {member6, &m.member6}, {send4, &m.send4}, {send6, &m.send6}})
    if (sock >= 0) *flag = 1, fds[count++] = sock;
  hostd::ReplyBuffer r;
  pollfd p{fd, POLLIN, 0};
  ssize_t got = -1;
  if (send_with_fds(fd, &m, sizeof m, fds, count) && poll(&p, 1, 5000) > 0)
    got = hostd::receive_reply(fd, &r);
  const auto rep = r.as<hostd::LeaseReply>();
  if (r.refused(got) || (got == static_cast<ssize_t>(sizeof rep) && rep.type == hostd::kLeaseReply && !rep.granted)) {
    SV_ERROR("the host service would not give this process its slot %u again (%s): its QPs can no longer be "
             "reached",
             slot, r.refused(got) ? "it refused the connection" : "another process of this host has it now");
    *refused = true;
  }
  if (got != static_cast<ssize_t>(sizeof rep) || rep.type != hostd::kLeaseReply || !rep.granted) {
    ::close(fd);
    return false;
  }
  // (The old connection is gone; the old table stays mapped: a thread may
  // be reading it now. A restart costs one table's memory. The new
  // connection takes the old one's number: a thread about to send on it
  // never meets a number closed, or reused by something else.)
  if (fd_ >= 0) {
    dup3(fd, fd_, O_CLOEXEC);
    ::close(fd);
  } else {
    fd_ = fd;
  }
  slot_ = slot;
  table_ = nullptr;
  steered4_ = steered6_ = -1;
  if (!receive_sockets()) SV_WARN("the host service sent no sockets when we rejoined it");
  return true;
}

bool HostService::attest(int send4, int send6) {
  if (fd_ < 0) return false;
  hostd::Attest m;
  int fds[2];
  int count = 0;
  if (send4 >= 0) m.v4 = 1, fds[count++] = send4;
  if (send6 >= 0) m.v6 = 1, fds[count++] = send6;
  // (The reply comes on the connection datagrams also come on, once our
  // network thread runs: this is done before it starts.)
  if (!send_with_fds(fd_, &m, sizeof m, fds, count)) return false;
  // (Datagrams the service hands on may come first: lost, as on a wire.)
  hostd::AttestReply rep;
  rep.type = 0;
  for (int waited = 0; waited < 50 && rep.type != hostd::kAttestReply; ++waited) {
    pollfd p{fd_, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    hostd::ReplyBuffer r;
    const ssize_t got = hostd::receive_reply(fd_, &r, MSG_DONTWAIT);
    if (got <= 0 && !(got < 0 && (errno == EAGAIN || errno == EINTR))) break;
    if (got == static_cast<ssize_t>(sizeof rep) && r.bytes[0] == hostd::kAttestReply) rep = r.as<hostd::AttestReply>();
  }
  if (rep.type != hostd::kAttestReply || !rep.granted) {
    SV_WARN("the host service did not vouch for the ports we send from: our datagrams to other local users' "
            "processes will be dropped");
    return false;
  }
  SV_DEBUG("the host service vouches for our ports %u (IPv4) and %u (IPv6)", rep.port4, rep.port6);
  return true;
}

void HostService::abandon() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool HostService::lease(uint32_t slot, uint32_t* holder) {
  *holder = UINT32_MAX;
  hostd::Lease req;
  req.slot = slot;
  // (A send refused because the service closed the connection: it may
  // have said why first, which is still there to read.)
  const bool sent = ::send(fd_, &req, sizeof req, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof req);
  if (!sent && errno != EPIPE && errno != ECONNRESET) return false;
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
    hostd::ReplyBuffer m;
    const ssize_t got = hostd::receive_reply(fd_, &m);
    if (m.refused(got)) {
      const auto r = m.as<hostd::Refusal>();
      SV_ERROR("the host service refused this process's connection: %s (uid %u holds %u, its share is %u)",
               hostd::refusal_reason_str(r.reason), r.uid, r.held, r.share);
      *holder = kRefusedByService;
      return false;
    }
    const auto rep = m.as<hostd::LeaseReply>();
    if (got != static_cast<ssize_t>(sizeof rep) || rep.type != hostd::kLeaseReply || rep.slot != slot) return false;
    if (!rep.granted) {
      *holder = rep.holder_uid;
      return false;
    }
    slot_ = slot;
    receive_sockets();  // (without them: no steering, and local senders unverified: their datagrams dropped)
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
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = recvmsg(fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n == 0) {
      errno = EPIPE;
      return -1;
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    int fds[4];
    int count = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        if (count < 4) fds[count++] = fd;
        else ::close(fd);
      }
    }
    const bool whole = !(msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC));
    if (whole && n >= 1 && (h->type == hostd::kChannelOpen || h->type == hostd::kChannelClosed)) {
      ChannelEvent ev;
      hostd::ChannelOpen m;
      std::memcpy(static_cast<void*>(&m), h, std::min(sizeof m, static_cast<size_t>(n)));
      const int want = h->type == hostd::kChannelClosed ? 0 : 4;
      if (n == static_cast<ssize_t>(sizeof m) && count == want) {
        ev.open = h->type == hostd::kChannelOpen;
        ev.peer_slot = m.peer_slot;
        ev.peer_pid = static_cast<pid_t>(m.peer_pid);
        ev.count = count;
        std::copy(fds, fds + count, ev.fds);
        channel_events_.push_back(ev);
        continue;
      }
    }
    for (int i = 0; i < count; ++i) ::close(fds[i]);
    if (!whole || n < static_cast<ssize_t>(sizeof *h) || h->type != hostd::kDatagram) continue;
    return n - static_cast<ssize_t>(sizeof *h);
  }
}

bool HostService::request_channel(uint32_t peer_slot) {
  if (fd_ < 0) return false;
  hostd::ChannelRequest m;
  m.slot = peer_slot;
  return ::send(fd_, &m, sizeof m, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof m);
}

}  // namespace sv::shm
