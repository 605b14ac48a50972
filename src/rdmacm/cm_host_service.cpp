#include "cm_host_service.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>

#include "ibcm/gsi_mailbox.h"
#include "net/udp_sport.h"
#include "util/host_service_socket.h"
#include "util/private_heap.h"

namespace sv::rdmacm {
namespace {

namespace hostd = sv::hostd;

// One connection per process (a fork child makes its own: the parent's
// claims are the parent's), and the claims made through it.
struct Link : PrivateHeapObject {
  std::mutex mu;
  int fd = -1;
  pid_t pid = 0;
  PrivateMap<int, std::string> claimed;  // mailbox fd -> key
};

Link& link() {
  static Link* l = new Link;  // never destroyed: mailboxes close during exit
  return *l;
}

// The connection, opened on first use; -1 when no service runs.
int connection(Link& l) {
  if (l.pid != getpid()) {
    if (l.fd >= 0) close(l.fd);  // the parent's
    l.fd = -1;
    l.claimed.clear();
    l.pid = getpid();
  }
  if (l.fd < 0) {
    uint32_t untrusted;
    l.fd = sv::connect_host_service(&untrusted);
  }
  return l.fd;
}

hostd::Claim claim_message(uint8_t type, const std::string& key) {
  hostd::Claim c;
  c.type = type;
  c.length = static_cast<uint32_t>(std::min(key.size(), sizeof c.key));
  std::memcpy(c.key, key.data(), c.length);
  return c;
}

}  // namespace

bool host_service_runs() {
  Link& l = link();
  std::lock_guard g(l.mu);
  return connection(l) >= 0;
}

int claim_mailbox(int fd, const std::string& name) {
  Link& l = link();
  std::lock_guard g(l.mu);
  const int s = connection(l);
  if (s < 0) return 0;
  const std::string key = ibcm::mailbox_key(name);
  const hostd::Claim c = claim_message(hostd::kClaim, key);
  if (send(s, &c, sizeof c, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof c)) {
    errno = EAGAIN;
    return -1;
  }
  for (;;) {
    pollfd p{s, POLLIN, 0};
    const int n = poll(&p, 1, 5000);
    if (n < 0 && errno == EINTR) continue;
    hostd::ClaimReply rep;
    if (n <= 0 || recv(s, &rep, sizeof rep, 0) != static_cast<ssize_t>(sizeof rep) || rep.type != hostd::kClaimReply) {
      close(s);  // no answer: a service that is gone or stuck
      l.fd = -1;
      errno = EAGAIN;
      return -1;
    }
    if (!rep.granted) {
      errno = EADDRINUSE;
      return -1;
    }
    l.claimed[fd] = key;
    return 0;
  }
}

bool send_local_datagram(const in6_addr& src, uint16_t src_port, const in6_addr& dst, uint8_t tclass,
                         const uint8_t* data, size_t len) {
  Link& l = link();
  std::lock_guard g(l.mu);
  const int s = connection(l);
  if (s < 0) return false;
  hostd::DatagramHeader h;
  h.type = hostd::kSend;
  h.src = src;
  h.dst = dst;
  h.src_port = src_port;
  h.dst_port = sv::net::kRoceUdpPort;
  h.traffic_class = tclass;
  iovec iov[2] = {{&h, sizeof h}, {const_cast<uint8_t*>(data), len}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  return sendmsg(s, &msg, MSG_NOSIGNAL | MSG_DONTWAIT) == static_cast<ssize_t>(sizeof h + len);
}

void release_mailbox(int fd) {
  Link& l = link();
  std::lock_guard g(l.mu);
  if (l.pid != getpid()) return;
  auto it = l.claimed.find(fd);
  if (it == l.claimed.end()) return;
  const hostd::Claim c = claim_message(hostd::kRelease, it->second);
  l.claimed.erase(it);
  if (l.fd >= 0) (void)!send(l.fd, &c, sizeof c, MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace sv::rdmacm
