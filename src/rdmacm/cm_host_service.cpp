#include "cm_host_service.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "ibcm/gsi_mailbox.h"
#include "net/udp_sport.h"
#include "util/host_service_socket.h"
#include "util/log.h"
#include "util/private_heap.h"

namespace sv::rdmacm {
namespace {

namespace hostd = sv::hostd;

// One connection per process (a fork child makes its own: the parent's
// claims are the parent's), and the claims made through it.
struct ServiceLink : PrivateHeapObject {
  std::mutex mu;
  int fd = -1;
  pid_t pid = 0;
  PrivateMap<int, std::string> claimed;  // mailbox fd -> key
  pid_t watcher_pid = 0;                 // the process whose watcher thread runs (watch)
};

ServiceLink& link() {
  static ServiceLink* l = new ServiceLink;  // never destroyed: mailboxes close during exit
  return *l;
}

void start_watcher(ServiceLink& l);

// The connection, opened on first use; -1 when no service runs.
int connection(ServiceLink& l) {
  if (l.pid != getpid()) {
    if (l.fd >= 0) close(l.fd);  // the parent's
    l.fd = -1;
    l.claimed.clear();
    l.pid = getpid();
  }
  if (l.fd < 0) {
    uint32_t untrusted;
    l.fd = sv::connect_host_service(&untrusted);
    if (l.fd < 0 && errno == ETIMEDOUT) {
      SV_ERROR("the host service (@%s) did not take the connection manager's connection in %d ms", kHostServiceSocket,
               kHostServiceConnectMs);
      errno = ETIMEDOUT;
      return -2;
    }
    if (l.fd >= 0) start_watcher(l);
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

// Sends a claim of `key` on `s` and waits for the answer: 0 (granted), -1
// with errno EADDRINUSE (another user's CM has it) or EAGAIN (no answer).
int claim_on(int s, const std::string& key) {
  const hostd::Claim c = claim_message(hostd::kClaim, key);
  if (send(s, &c, sizeof c, MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof c)) {
    errno = EAGAIN;
    return -1;
  }
  for (;;) {
    pollfd p{s, POLLIN, 0};
    const int n = poll(&p, 1, 5000);
    if (n < 0 && errno == EINTR) continue;
    hostd::ReplyBuffer m;
    const ssize_t got = n > 0 ? hostd::receive_reply(s, &m) : -1;
    if (m.refused(got)) {
      const auto r = m.as<hostd::Refusal>();
      SV_ERROR("the host service refused the connection manager's connection: %s (uid %u holds %u, its share is %u)",
               hostd::refusal_reason_str(r.reason), r.uid, r.held, r.share);
    }
    const auto rep = m.as<hostd::ClaimReply>();
    if (got != static_cast<ssize_t>(sizeof rep) || rep.type != hostd::kClaimReply) {
      errno = EAGAIN;
      return -1;
    }
    if (!rep.granted) {
      errno = EADDRINUSE;
      return -1;
    }
    return 0;
  }
}

// The claims live in the service, with our connection: when the service
// goes (a restart), they go too, and CM MADs for our listeners and
// connections (a DREQ at the end of a connection that outlived the
// restart) would reach no one. This thread notices the connection's end
// (it sleeps in poll(), waking once a second to see whether the connection
// changed), connects to the service that comes back, and claims every
// mailbox anew.
void watch(ServiceLink* lp, uint32_t trusted_uid) {
  ServiceLink& l = *lp;
  const pid_t me = getpid();
  uint64_t pause_ms = 50;
  for (;;) {
    int fd;
    bool to_claim;
    {
      std::lock_guard g(l.mu);
      if (l.pid != me) return;  // (a fork child's copy of this thread does not exist; this is the parent's)
      fd = l.fd;
      to_claim = !l.claimed.empty();
    }
    if (fd < 0 && !to_claim) {  // nothing to restore: the next claim connects
      std::this_thread::sleep_for(std::chrono::seconds(1));
      continue;
    }
    if (fd >= 0) {
      pollfd p{fd, 0, 0};  // (only a hang-up or an error wakes it)
      if (poll(&p, 1, 1000) <= 0 || !(p.revents & (POLLHUP | POLLERR))) continue;
      std::lock_guard g(l.mu);
      if (l.fd != fd) continue;
      close(l.fd);
      l.fd = -1;
      if (l.claimed.empty()) continue;
      SV_WARN("the host service closed the connection manager's connection: claiming its %zu mailboxes again "
              "when it returns",
              l.claimed.size());
      pause_ms = 50;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
    std::lock_guard g(l.mu);
    if (l.pid != me || l.fd >= 0 || l.claimed.empty()) continue;
    uint32_t untrusted;
    const int s = connect_host_service(&untrusted, trusted_uid);
    if (s < 0) {
      pause_ms = std::min<uint64_t>(2 * pause_ms, 2000);
      continue;
    }
    l.fd = s;
    size_t lost = 0;
    for (const auto& [mailbox, key] : l.claimed)
      if (claim_on(s, key) != 0) ++lost;
    if (lost)
      SV_WARN("the host service did not give the connection manager %zu of its %zu mailboxes back", lost,
              l.claimed.size());
    else
      SV_INFO("the connection manager claimed its %zu mailboxes again", l.claimed.size());
  }
}

void start_watcher(ServiceLink& l) {
  if (l.watcher_pid == getpid()) return;
  l.watcher_pid = getpid();
  std::thread(watch, &l, host_service_uid()).detach();  // (the knobs, read here: see connect_host_service)
}

}  // namespace

bool host_service_runs() {
  ServiceLink& l = link();
  std::lock_guard g(l.mu);
  return connection(l) >= 0;
}

int claim_mailbox(int fd, const std::string& name) {
  ServiceLink& l = link();
  std::lock_guard g(l.mu);
  const int s = connection(l);
  if (s == -2) {  // a service runs, but did not answer: the claim is not made
    errno = EAGAIN;
    return -1;
  }
  if (s < 0) return 0;
  const std::string key = ibcm::mailbox_key(name);
  if (claim_on(s, key) != 0) {
    if (errno == EAGAIN) {  // no answer: a service that is gone or stuck
      close(s);
      l.fd = -1;
    }
    return -1;
  }
  l.claimed[fd] = key;
  return 0;
}

bool send_local_datagram(const in6_addr& src, uint16_t src_port, const in6_addr& dst, uint8_t tclass,
                         const uint8_t* data, size_t len) {
  ServiceLink& l = link();
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
  ServiceLink& l = link();
  std::lock_guard g(l.mu);
  if (l.pid != getpid()) return;
  auto it = l.claimed.find(fd);
  if (it == l.claimed.end()) return;
  const hostd::Claim c = claim_message(hostd::kRelease, it->second);
  l.claimed.erase(it);
  if (l.fd >= 0) (void)!send(l.fd, &c, sizeof c, MSG_NOSIGNAL | MSG_DONTWAIT);
}

}  // namespace sv::rdmacm
