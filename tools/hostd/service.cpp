#include "service.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>

#include "hostd/datagram_route.h"
#include "ibcm/gsi_mailbox.h"
#include "ibcm/mad_header.h"
#include "net/roce_datagram.h"
#include "net/roce_frame.h"
#include "net/roce_header.h"
#include "net/roce_opcode.h"
#include "util/fd_passing.h"
#include "util/host_service_socket.h"
#include "util/unix_socket_address.h"

namespace sv::hostd {
namespace {

// Descriptors the service keeps for itself besides its connections: the
// sockets, epoll, the spare, what libc and a verbose stderr need.
constexpr size_t kReservedFds = 32;
// Per wake-up, at most this many connections accepted and messages read
// from one connection: one busy user cannot keep the loop from the others.
constexpr int kAcceptsPerWake = 64;
constexpr int kMessagesPerWake = 64;

// The file limit, raised to its hard ceiling (a systemd unit starts with a
// soft limit of 1024): connections are what the service is for.
size_t file_limit() {
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) != 0) return 1024;
  if (r.rlim_cur < r.rlim_max) {
    rlimit raised = r;
    raised.rlim_cur = r.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) r = raised;
  }
  return r.rlim_cur == RLIM_INFINITY ? size_t{1} << 20 : static_cast<size_t>(r.rlim_cur);
}

// Each connection costs up to three descriptors: itself and the two
// sockets its process sends from, which the service holds (attest).
size_t connection_capacity(size_t wanted) {
  const size_t limit = file_limit();
  const size_t room = (limit > 2 * kReservedFds ? limit - kReservedFds : limit / 2) / 3;
  return wanted ? std::min(wanted, room) : room;
}

// A UDP socket a process says it sends from, of `family`: its port, if it
// is one only that socket can send from (bound, not 4791, no sharing
// options); else 0.
uint16_t exclusive_udp_port(int fd, int family) {
  auto get = [&](int level, int name) {
    int v = -1;
    socklen_t len = sizeof v;
    return getsockopt(fd, level, name, &v, &len) == 0 ? v : -1;
  };
  if (get(SOL_SOCKET, SO_DOMAIN) != family || get(SOL_SOCKET, SO_TYPE) != SOCK_DGRAM ||
      get(SOL_SOCKET, SO_PROTOCOL) != IPPROTO_UDP || get(SOL_SOCKET, SO_REUSEADDR) != 0 ||
      get(SOL_SOCKET, SO_REUSEPORT) != 0)
    return 0;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  const uint16_t port = ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                                : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
  return port == net::kRoceUdpPort ? 0 : port;
}

// A member of the port's groups a process says it has: a UDP socket of
// `family` on 4791 that shares the port (the kernel steers to it only if
// it is in our group: a map entry for any other is never picked).
bool is_port_member(int fd, int family) {
  auto get = [&](int level, int name) {
    int v = -1;
    socklen_t len = sizeof v;
    return getsockopt(fd, level, name, &v, &len) == 0 ? v : -1;
  };
  if (get(SOL_SOCKET, SO_DOMAIN) != family || get(SOL_SOCKET, SO_TYPE) != SOCK_DGRAM ||
      get(SOL_SOCKET, SO_PROTOCOL) != IPPROTO_UDP || get(SOL_SOCKET, SO_REUSEPORT) != 1)
    return false;
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
  return ntohs(family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                 : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port) == net::kRoceUdpPort;
}

}  // namespace

Service::Service(Options o)
    : opt_(o), budget_(connection_capacity(o.max_connections)), claims_(o.claims),
      inbox_(sizeof(DatagramHeader) + 65536) {
  std::fill(std::begin(by_slot_), std::end(by_slot_), -1);
}

Service::~Service() {
  for (auto& [fd, c] : clients_) {
    forget_attested(c);
    close(fd);
  }
  if (table_) munmap(table_, sizeof *table_);
  if (table_ro_fd_ >= 0) close(table_ro_fd_);
  if (listener_ >= 0) close(listener_);
  if (epoll_ >= 0) close(epoll_);
  if (spare_fd_ >= 0) close(spare_fd_);
}

void Service::watch(int fd) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = fd;
  epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev);
}

// The RoCE port: a reuseport group of our uid whose members the kernel
// picks by DestQP (kernel_steering.h), or, where the kernel refuses BPF,
// sockets no one shares, through which the service hands on every datagram.
bool Service::open_port() {
  if (opt_.steer) {
    const int fd4 = roce_member_socket(AF_INET);
    const int fd6 = fd4 >= 0 ? roce_member_socket(AF_INET6) : -1;
    if (fd4 >= 0 && steer4_.attach(fd4) && (fd6 < 0 || steer6_.attach(fd6))) {
      sock_.adopt(fd4, fd6);
      return true;
    }
    const int e = errno;
    if (fd4 >= 0) close(fd4);
    if (fd6 >= 0) close(fd6);
    if (fd4 < 0) {
      errno = e;
      return false;
    }
    steer4_.reset();
    steer6_.reset();
    std::fprintf(stderr,
                 "softverbs-hostd: the kernel refused the steering program (%s): every datagram goes through the "
                 "service\n",
                 std::strerror(e));
  }
  return sock_.open_exclusive();
}

// The table of which process sends from which port: a memfd we map to
// write, and a read-only descriptor of it for processes.
bool Service::open_attestation_table() {
  const int fd = memfd_create("softverbs-hostd-ports", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0 || ftruncate(fd, sizeof(PortAttestationTable)) != 0) {
    std::perror("softverbs-hostd: the port attestation table");
    if (fd >= 0) close(fd);
    return false;
  }
  fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
  void* t = mmap(nullptr, sizeof(PortAttestationTable), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  table_ro_fd_ = ::open(self.c_str(), O_RDONLY | O_CLOEXEC);
  close(fd);
  if (t == MAP_FAILED || table_ro_fd_ < 0) {
    std::perror("softverbs-hostd: the port attestation table");
    return false;
  }
  table_ = static_cast<PortAttestationTable*>(t);
  return true;
}

bool Service::open() {
  if (!open_attestation_table()) return false;
  listener_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  socklen_t len;
  const sockaddr_un a = abstract_unix_address(kHostServiceSocket, &len);
  // (A deep backlog: processes that start together wait there, not in a
  // refused connect; connect_host_service gives up after its timeout.)
  if (listener_ < 0 || bind(listener_, reinterpret_cast<const sockaddr*>(&a), len) != 0 ||
      listen(listener_, 4096) != 0) {
    std::fprintf(stderr, "softverbs-hostd: cannot bind @%s: %s%s\n", kHostServiceSocket, std::strerror(errno),
                 errno == EADDRINUSE ? " (another host service runs in this network namespace)" : "");
    return false;
  }
  epoll_ = epoll_create1(EPOLL_CLOEXEC);
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (epoll_ < 0) {
    std::perror("softverbs-hostd: epoll_create1");
    return false;
  }
  // The port, once the name is ours: processes that held the port
  // themselves (no service ran when they started) see the name, let the
  // port go and join (hostd::Rejoin) within a second or two; until then
  // their connections wait in the backlog.
  for (int waited_ms = 0; !open_port(); waited_ms += 100) {
    if (errno != EADDRINUSE || waited_ms >= opt_.port_wait_ms) {
      std::fprintf(stderr, "softverbs-hostd: cannot bind UDP port %u in this network namespace: %s\n",
                   net::kRoceUdpPort, std::strerror(errno));
      return false;
    }
    if (waited_ms == 0) {
      const std::string holder = udp_port_holder(net::kRoceUdpPort);
      std::fprintf(stderr, "softverbs-hostd: UDP port %u is held by %s: waiting up to %d s for it to be handed over\n",
                   net::kRoceUdpPort, holder.empty() ? "another program" : holder.c_str(), opt_.port_wait_ms / 1000);
    }
    usleep(100'000);
  }
  watch(listener_);
  watch(sock_.fd4());
  if (sock_.fd6() >= 0) watch(sock_.fd6());
  if (opt_.verbose)
    std::fprintf(stderr, "softverbs-hostd: at most %zu connections, %zu per user alone; %s\n", budget_.capacity(),
                 budget_.share_of(0),
                 steering() ? "the kernel steers datagrams to processes" : "datagrams go through the service");
  return true;
}

// Tells a connection why it is not taken, and closes it: its process says
// so and fails at once, rather than waiting for a lease that never comes.
void Service::refuse(int fd, uint32_t uid, uint8_t reason) {
  Refusal r;
  r.reason = reason;
  r.uid = uid;
  r.held = static_cast<uint32_t>(budget_.held_by(uid));
  r.share = static_cast<uint32_t>(budget_.share_of(uid));
  (void)!send(fd, &r, sizeof r, MSG_DONTWAIT | MSG_NOSIGNAL);
  close(fd);
  ++n_.refused;
  if (opt_.verbose && (n_.refused & (n_.refused - 1)) == 0)  // (1, 2, 4, ...: a flood does not flood the log)
    std::fprintf(stderr, "softverbs-hostd: refused a connection of uid %u (%u held, its share %u); %llu refused\n",
                 uid, r.held, r.share, static_cast<unsigned long long>(n_.refused));
}

void Service::accept_clients() {
  for (int k = 0; k < kAcceptsPerWake; ++k) {
    int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0 && (errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
      // Out of descriptors (the budget leaves room, but the system may not):
      // the connection waiting would keep the listener readable and the
      // loop spinning. Give up the spare to take it, refuse it, take the
      // spare back.
      close(spare_fd_);
      fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd >= 0) refuse(fd, peer_uid(fd), kRefusedNoDescriptors);
      spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      continue;
    }
    if (fd < 0) return;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(fd);
      continue;
    }
    if (!budget_.admit(cred.uid)) {
      refuse(fd, cred.uid, kRefusedOverShare);
      continue;
    }
    int size = 4 << 20;  // room for a burst while the process's network thread is not running
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    clients_[fd] = Client{cred.uid, cred.pid, 0, false};
    watch(fd);
    if (opt_.verbose) std::fprintf(stderr, "softverbs-hostd: pid %d (uid %u) connected\n", cred.pid, cred.uid);
  }
}

void Service::drop_client(int fd) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  Client& c = it->second;
  if (c.slot && by_slot_[c.slot] == fd) {
    by_slot_[c.slot] = -1;
    steer4_.unsteer(c.slot);
    steer6_.unsteer(c.slot);
  }
  forget_attested(c);
  if (c.network) {
    if (auto p = network_by_pid_.find(c.pid); p != network_by_pid_.end() && p->second == fd) network_by_pid_.erase(p);
    if (auto u = network_by_uid_.find(c.uid); u != network_by_uid_.end()) {
      u->second.erase(fd);
      if (u->second.empty()) network_by_uid_.erase(u);
    }
  }
  if (opt_.verbose) std::fprintf(stderr, "softverbs-hostd: pid %d (uid %u) left slot %u\n", c.pid, c.uid, c.slot);
  budget_.leave(c.uid);
  claims_.drop(fd);
  clients_.erase(it);
  close(fd);  // (epoll forgets it)
}

// A message from a process: a lease request (one slot per connection, free
// on the whole host), a CM mailbox claim, word that its network thread
// runs, or a datagram for a QP of this host.
bool Service::serve_client(int fd) {
  uint8_t* const bytes = inbox_.data();
  int fds[kMaxPassedFds];
  int count = 0;
  const ssize_t n = receive_with_fds(fd, bytes, inbox_.size(), fds, kMaxPassedFds, &count, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  if (n <= 0 && !(n < 0 && errno == EMSGSIZE)) {
    drop_client(fd);
    return false;
  }
  if (n < 0) return true;  // (too large: dropped, its descriptors closed)
  Client& c = clients_[fd];
  if (bytes[0] == kAttest || bytes[0] == kRejoin) {  // (they take the descriptors)
    if (bytes[0] == kAttest) attest(fd, c, bytes, static_cast<size_t>(n), fds, count);
    else rejoin(fd, c, bytes, static_cast<size_t>(n), fds, count);
    return clients_.count(fd) != 0;
  }
  for (int i = 0; i < count; ++i) close(fds[i]);  // (no other message carries any)
  switch (bytes[0]) {
    case kNetworkUp:
      network_up(fd, c);
      return true;
    case kClaim:
    case kRelease:
      claim(fd, c, bytes, static_cast<size_t>(n), bytes[0] == kRelease);
      return clients_.count(fd) != 0;
    case kSend:
      from_process(c, bytes, static_cast<size_t>(n));
      return true;
    default:
      lease(fd, c, bytes, static_cast<size_t>(n));
      return clients_.count(fd) != 0;
  }
}

void Service::lease(int fd, Client& c, const uint8_t* bytes, size_t n) {
  Lease req;
  std::memcpy(&req, bytes, std::min(sizeof req, n));
  LeaseReply rep;
  rep.slot = req.slot;
  if (n != sizeof req || req.type != kLease || req.slot == 0 || req.slot >= shm::kMaxProcs) {
    rep.holder_uid = UINT32_MAX - 1;  // not a slot anyone can have
  } else if (c.slot) {
    rep.holder_uid = c.uid;  // one lease per process
  } else if (by_slot_[req.slot] >= 0) {
    rep.holder_uid = clients_[by_slot_[req.slot]].uid;
  } else {
    rep.granted = 1;
    c.slot = req.slot;
    by_slot_[req.slot] = fd;
    if (opt_.verbose) std::fprintf(stderr, "softverbs-hostd: pid %d (uid %u) leased slot %u\n", c.pid, c.uid, c.slot);
  }
  if (send(fd, &rep, sizeof rep, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof rep) ||
      (rep.granted && !send_sockets(fd, req.slot, /*members=*/true, /*steered=*/false)))
    drop_client(fd);
}

// What a process receives with, after its lease (hostd::Sockets): the
// attestation table, and with steering its members of the port's groups,
// to which the kernel now brings the datagrams for its slot.
bool Service::send_sockets(int fd, uint32_t slot, bool members_too, bool steered) {
  Sockets m;
  m.steered = steered;
  int fds[3] = {table_ro_fd_, -1, -1};
  int count = 1;
  int members[2] = {-1, -1};
  if (steering() && members_too) {
    members[0] = steered_member_socket(AF_INET);
    members[1] = sock_.fd6() >= 0 ? steered_member_socket(AF_INET6) : -1;
    if (members[0] >= 0 && steer4_.steer(slot, members[0])) m.v4 = 1, fds[count++] = members[0];
    if (members[1] >= 0 && steer6_.steer(slot, members[1])) m.v6 = 1, fds[count++] = members[1];
    m.steered = m.v4;
    if (!m.v4) {
      std::fprintf(stderr, "softverbs-hostd: no steered socket for slot %u (%s): its datagrams go through the service\n",
                   slot, std::strerror(errno));
      steer4_.unsteer(slot);
      steer6_.unsteer(slot);
      count = 1, m.v6 = 0;
    }
  }
  const bool sent = send_with_fds(fd, &m, sizeof m, fds, count, MSG_DONTWAIT);
  // (In flight, the member sockets live on; ours are not needed: a member
  // the process closes, or loses with its life, leaves the group and the map.)
  for (int s : members)
    if (s >= 0) close(s);
  return sent;
}

// A process hands over the sockets it sends from: held here, their ports
// are its own for as long as its connection lasts, and the table says so.
void Service::attest(int fd, Client& c, const uint8_t* bytes, size_t n, const int* fds, int count) {
  Attest m;
  std::memcpy(&m, bytes, std::min(sizeof m, n));
  AttestReply rep;
  const bool ok = n == sizeof m && c.slot && count == (m.v4 ? 1 : 0) + (m.v6 ? 1 : 0) && count > 0 &&
                  vouch(c, m.v4 ? fds[0] : -1, m.v6 ? fds[count - 1] : -1, &rep);
  if (!ok) ++n_.forged_source;
  rep.granted = ok;
  if (send(fd, &rep, sizeof rep, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof rep)) drop_client(fd);
}

// Takes the sockets a process sends from (-1: none of that family) and
// vouches for their ports as its slot's; false, and closes them, when one
// is not a socket only it can send from, or its port is another's.
bool Service::vouch(Client& c, int send4, int send6, AttestReply* rep) {
  const int fds[2] = {send4, send6};
  uint16_t ports[2] = {0, 0};
  bool ok = true;
  for (int f = 0; f < 2; ++f) {
    if (fds[f] < 0) continue;
    ports[f] = exclusive_udp_port(fds[f], f == 0 ? AF_INET : AF_INET6);
    const uint16_t holder = ports[f] ? table_->slot[f][ports[f]].load(std::memory_order_relaxed) : 0;
    if (!ports[f] || (holder && holder != c.slot)) ok = false;
  }
  for (int f = 0; f < 2; ++f) {
    if (fds[f] < 0) continue;
    if (!ok) {
      close(fds[f]);
      continue;
    }
    if (c.attested[f] >= 0) {  // (a second attest replaces the first)
      table_->slot[f][c.attested_port[f]].store(0, std::memory_order_release);
      close(c.attested[f]);
    }
    c.attested[f] = fds[f];
    c.attested_port[f] = ports[f];
    table_->slot[f][ports[f]].store(static_cast<uint16_t>(c.slot), std::memory_order_release);
    if (rep) (f == 0 ? rep->port4 : rep->port6) = ports[f];
  }
  return ok;
}

// A process that used a service before (this one's predecessor, which
// stopped) or held the port itself until now asks for its slot again, with
// the sockets it has (hostd::Rejoin): its members of the port's groups go
// on receiving (the kernel steers to them again), its sending ports are
// vouched for again. Its QPs keep their numbers, so its connections last.
void Service::rejoin(int fd, Client& c, const uint8_t* bytes, size_t n, const int* fds, int count) {
  Rejoin m;
  std::memcpy(&m, bytes, std::min(sizeof m, n));
  LeaseReply rep;
  rep.slot = m.slot;
  const bool well_formed = n == sizeof m && count == m.member4 + m.member6 + m.send4 + m.send6 && m.slot &&
                           m.slot < shm::kMaxProcs && !c.slot;
  if (!well_formed || by_slot_[m.slot] >= 0) {
    rep.holder_uid = !well_formed ? UINT32_MAX - 1 : clients_[by_slot_[m.slot]].uid;
    for (int i = 0; i < count; ++i) close(fds[i]);
    if (send(fd, &rep, sizeof rep, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof rep)) drop_client(fd);
    return;
  }
  int i = 0;
  const int member4 = m.member4 ? fds[i++] : -1, member6 = m.member6 ? fds[i++] : -1;
  const int send4 = m.send4 ? fds[i++] : -1, send6 = m.send6 ? fds[i++] : -1;
  c.slot = m.slot;
  by_slot_[m.slot] = fd;
  bool steered = false;
  if (steering()) {
    steered = member4 >= 0 && is_port_member(member4, AF_INET) && steer4_.steer(c.slot, member4);
    if (steered && member6 >= 0 && is_port_member(member6, AF_INET6)) steer6_.steer(c.slot, member6);
  }
  for (int s : {member4, member6})
    if (s >= 0) close(s);  // (the process keeps its own)
  if (!vouch(c, send4, send6, nullptr)) ++n_.forged_source;
  rep.granted = 1;
  if (opt_.verbose)
    std::fprintf(stderr, "softverbs-hostd: pid %d (uid %u) rejoined with slot %u%s\n", c.pid, c.uid, c.slot,
                 steered ? ", its sockets steered again" : "");
  // New members only for a process that had none (it held the port
  // itself): one that passed its own keeps them.
  const bool sent = send(fd, &rep, sizeof rep, MSG_DONTWAIT | MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof rep);
  if (!sent || !send_sockets(fd, c.slot, /*members=*/!m.member4 && !m.member6, steered)) drop_client(fd);
}

// The table forgets a process's ports before the service lets their
// sockets go: once closed, anyone may bind them.
void Service::forget_attested(Client& c) {
  for (int f = 0; f < 2; ++f) {
    if (c.attested[f] < 0) continue;
    if (table_) table_->slot[f][c.attested_port[f]].store(0, std::memory_order_release);
    close(c.attested[f]);
    c.attested[f] = -1;
  }
}

void Service::network_up(int fd, Client& c) {
  if (c.network) return;
  c.network = true;
  network_by_pid_.emplace(c.pid, fd);
  network_by_uid_[c.uid].insert(fd);
}

// A CM claims a mailbox key (or lets it go). A key another connection
// holds is refused, with its uid; so is one over the claimant's limits.
void Service::claim(int fd, const Client& c, const uint8_t* bytes, size_t n, bool release) {
  Claim m;
  std::memcpy(&m, bytes, std::min(sizeof m, n));
  if (n != sizeof m || m.length == 0 || m.length > sizeof m.key) return;  // (the CM waits, then gives up)
  const std::string_view key(m.key, m.length);
  if (release) {
    claims_.release(fd, key);
    return;
  }
  ClaimReply rep;
  uint32_t holder = 0;
  switch (claims_.claim(fd, c.uid, key, &holder)) {
    case ClaimTable::Result::kGranted:
      rep.granted = 1;
      break;
    case ClaimTable::Result::kHeld:
      rep.holder_uid = holder;
      break;
    case ClaimTable::Result::kOverLimit:
      rep.holder_uid = UINT32_MAX - 1;
      break;
  }
  if (send(fd, &rep, sizeof rep, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof rep)) drop_client(fd);
}

// The connection that reads CM MADs for the process that made connection
// `claimant` (its own datagram connection), else for another of its
// user's; -1 when none.
int Service::mad_reader_for(int claimant) const {
  auto c = clients_.find(claimant);
  if (c == clients_.end()) return -1;
  if (auto p = network_by_pid_.find(c->second.pid); p != network_by_pid_.end()) return p->second;
  if (auto u = network_by_uid_.find(c->second.uid); u != network_by_uid_.end() && !u->second.empty())
    return *u->second.begin();
  return -1;
}

int Service::any_network_reader() const {
  return network_by_pid_.empty() ? -1 : network_by_pid_.begin()->second;
}

// A datagram to QP1: a CM MAD goes to the user whose CM claimed the
// mailbox it is for (its process posts it there). One for no claimed
// mailbox goes to some process whose network thread runs, which answers
// as the CM of a host answers for nobody (a REJ: invalid service ID).
void Service::route_mad(const uint8_t* data, size_t len, const DatagramInfo& info) {
  constexpr size_t kMadAt = net::kBthBytes + 8;  // after the DETH
  if (len >= kMadAt + ibcm::kMadSize + net::kIcrcBytes) {
    for (const std::string& name : ibcm::mailboxes_for({data + kMadAt, ibcm::kMadSize})) {
      const int claimant = claims_.owner_of(ibcm::mailbox_key(name));
      if (claimant < 0) continue;
      const int reader = mad_reader_for(claimant);
      if (reader >= 0) send_to(reader, data, len, 0, info);
      else ++n_.no_owner;
      return;
    }
  }
  const int reader = any_network_reader();
  if (reader >= 0) send_to(reader, data, len, 0, info);
  else ++n_.no_owner;
}

// Whether a datagram that local process `slot` sent speaks for that
// process only: a UD datagram names a source QP of its slot (or QP1, the
// CM's, which librdmacm sends without a slot of its own).
bool speaks_for_itself(const uint8_t* data, size_t len, uint32_t slot) {
  const bool ud = (data[0] & net::kTransportMask) == net::kTransportUd;
  if (!ud) return slot != 0;
  if (len < net::kBthBytes + 8) return false;
  const uint32_t src_qp = net::be::get24(data + net::kBthBytes + 5);
  return src_qp == 1 || (slot && shm::qpn_slot(src_qp) == slot);
}

// A CM MAD from librdmacm over its connection (kSend): routed as one from
// the wire, stamped with the sender's slot when it has one. Its addresses
// must be this host's: a local process speaks only for itself, never for
// another host (whose packets come from the wire only). Datagrams for
// processes' QPs go by UDP from ports the service vouches for (attest),
// never this way.
void Service::from_process(const Client& c, const uint8_t* bytes, size_t n) {
  DatagramHeader h;
  if (n < sizeof h + net::kBthBytes + net::kIcrcBytes) {
    ++n_.malformed;
    return;
  }
  std::memcpy(&h, bytes, sizeof h);
  const uint8_t* data = bytes + sizeof h;
  const size_t len = n - sizeof h;
  if (!is_local_address(h.src) || !is_local_address(h.dst) || route_of(data, len).to != Destination::kCm ||
      !speaks_for_itself(data, len, c.slot)) {
    ++n_.forged_source;
    return;
  }
  DatagramInfo info;
  info.src = h.src;
  info.dst = h.dst;
  info.src_port = h.src_port;
  info.traffic_class = h.traffic_class;
  info.hop_limit = h.hop_limit;
  stamp_ = static_cast<uint16_t>(c.slot);
  route_one(data, len, info);
  stamp_ = 0;
}

bool Service::send_to(int fd, const uint8_t* data, size_t len, uint16_t seg, const DatagramInfo& info) {
  DatagramHeader h;
  h.flags = stamp_ ? kFromProcess : 0;
  h.sender_slot = stamp_;
  h.seg = seg;
  h.src_port = info.src_port;
  h.dst_port = net::kRoceUdpPort;
  h.traffic_class = info.traffic_class;
  h.hop_limit = info.hop_limit;
  h.src = info.src;
  h.dst = info.dst;
  iovec iov[2] = {{&h, sizeof h}, {const_cast<uint8_t*>(data), len}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  for (;;) {
    const ssize_t sent = sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent >= 0) {
      ++n_.forwarded;
      return true;
    }
    if (errno == EINTR) continue;
    ++n_.owner_busy;  // its queue is full (it is not reading): lost, as on a wire
    return false;
  }
}

// One datagram (from its BTH on, ICRC included).
void Service::route_one(const uint8_t* data, size_t len, const DatagramInfo& info) {
  const Route r = route_of(data, len);
  switch (r.to) {
    case Destination::kMalformed:
      ++n_.malformed;
      return;
    case Destination::kCm:
      route_mad(data, len, info);
      return;
    case Destination::kMulticast: {
      // Every process whose network thread runs gives it to its own members.
      bool sent = false;
      for (const auto& [pid, fd] : network_by_pid_) sent |= send_to(fd, data, len, 0, info);
      if (!sent) ++n_.no_owner;
      return;
    }
    case Destination::kProcess:
      if (by_slot_[r.slot] < 0) ++n_.no_owner;
      else send_to(by_slot_[r.slot], data, len, 0, info);
      return;
  }
}

// A received buffer: one datagram, or with UDP GRO several of one flow
// (`seg` bytes each, the last may be shorter). When they are all for one
// process's QPs they go to it in one message.
void Service::route(const uint8_t* data, size_t len, uint16_t seg, const DatagramInfo& info) {
  if (const uint32_t slot = whole_buffer_slot(data, len, seg); slot && by_slot_[slot] >= 0) {
    send_to(by_slot_[slot], data, len, seg, info);
    return;
  }
  if (seg && len > seg) {
    for (size_t off = 0; off < len; off += seg) route_one(data + off, std::min<size_t>(seg, len - off), info);
    return;
  }
  route_one(data, len, info);
}

void Service::receive_datagrams(int fd) {
  constexpr int kSlots = 16;
  constexpr size_t kCap = 65536;
  static std::vector<uint8_t> storage(kSlots * kCap);
  uint8_t* bufs[kSlots];
  for (int i = 0; i < kSlots; ++i) bufs[i] = storage.data() + i * kCap;
  ssize_t lens[kSlots];
  uint16_t segs[kSlots];
  DatagramInfo infos[kSlots];
  for (int round = 0; round < 16; ++round) {
    const int got = sock_.receive_many(fd, bufs, kCap, kSlots, lens, segs, infos);
    for (int i = 0; i < got; ++i) {
      if (lens[i] <= 0) {
        ++n_.malformed;
      } else if (!is_local_address(infos[i].src)) {
        route(bufs[i], static_cast<size_t>(lens[i]), segs[i], infos[i]);
      } else if (const uint32_t slot = attested_slot(table_, infos[i].src, infos[i].src_port)) {
        // A process of this host, from a port we vouch for: stamped with
        // its slot, each datagram checked to speak for it alone.
        stamp_ = static_cast<uint16_t>(slot);
        const size_t len = static_cast<size_t>(lens[i]), seg = segs[i] ? segs[i] : len;
        for (size_t off = 0; off < len; off += seg) {
          const size_t k = std::min(seg, len - off);
          if (k >= net::kBthBytes + net::kIcrcBytes && speaks_for_itself(bufs[i] + off, k, slot))
            route_one(bufs[i] + off, k, infos[i]);
          else
            ++n_.forged_source;
        }
        stamp_ = 0;
      } else {
        ++n_.local_udp;  // any local user can send from a local address
      }
    }
    if (got < kSlots) return;
  }
}

void Service::run(volatile int* stop) {
  constexpr int kEvents = 256;
  epoll_event events[kEvents];
  while (!*stop) {
    const int ready = epoll_wait(epoll_, events, kEvents, -1);
    if (ready < 0) {
      if (errno == EINTR) continue;
      std::perror("softverbs-hostd: epoll_wait");
      return;
    }
    bool accept_now = false;
    for (int i = 0; i < ready; ++i) {
      const int fd = events[i].data.fd;
      if (fd == listener_) {
        accept_now = true;  // (after the connections already in: they were first)
      } else if (fd == sock_.fd4() || fd == sock_.fd6()) {
        receive_datagrams(fd);
      } else if (clients_.count(fd)) {
        // Each readable client's messages, up to a bound: a burst of its
        // datagrams is routed in one wake-up, and a flood waits its turn.
        for (int k = 0; k < kMessagesPerWake && serve_client(fd); ++k) {
        }
      }
    }
    if (accept_now) accept_clients();
  }
}

}  // namespace sv::hostd
