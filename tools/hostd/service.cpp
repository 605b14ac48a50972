#include "service.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
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
#include "shm/peer_ring.h"
#include "util/clock.h"
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
// Ring pairs one process may have (shm/peer_ring.h: 2 x 4 MiB each, mapped
// by both): one per other user's process it talks to, at most this many.
constexpr uint32_t kMaxChannels = 64;

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

// Each connection costs up to four descriptors: itself, the two sockets its
// process sends from, which the service holds (attest), and its bell
// (open_channel).
size_t connection_capacity(size_t wanted) {
  const size_t limit = file_limit();
  const size_t room = (limit > 2 * kReservedFds ? limit - kReservedFds : limit / 2) / 4;
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

// The network namespace a socket belongs to (SO_NETNS_COOKIE, Linux 5.14);
// 0 when the kernel cannot say.
uint64_t netns_cookie(int fd) {
  uint64_t cookie = 0;
  socklen_t len = sizeof cookie;
#ifdef SO_NETNS_COOKIE
  if (getsockopt(fd, SOL_SOCKET, SO_NETNS_COOKIE, &cookie, &len) != 0) cookie = 0;
#endif
  return cookie;
}

}  // namespace

// A socket a process hands us is of this network namespace (a user who may
// make namespaces of its own could otherwise claim ports here that it
// holds only there).
bool Service::in_our_namespace(int fd) const {
  if (!netns_cookie_) return true;
  return netns_cookie(fd) == netns_cookie_;
}

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
  end_lingering(UINT64_MAX);
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
  // Ours to write through this mapping alone: once it is made, no one may
  // write the file or map it writable again (F_SEAL_FUTURE_WRITE), root
  // included; and its mode keeps a process from reopening the read-only
  // descriptor we give it for writing (through /proc/self/fd).
  void* t = mmap(nullptr, sizeof(PortAttestationTable), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (t == MAP_FAILED || fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) != 0 ||
      fchmod(fd, 0444) != 0) {
    std::perror("softverbs-hostd: sealing the port attestation table");
    if (t != MAP_FAILED) munmap(t, sizeof(PortAttestationTable));
    close(fd);
    return false;
  }
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
  load_state();
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
  netns_cookie_ = netns_cookie(sock_.fd4());
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
  linger_attested(c);
  close_channels_of(c);
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
  // Descriptors that came with the message: a handler that keeps one sets
  // its entry to -1; every other is closed here, whatever the message was.
  struct Passed {
    int fds[kMaxPassedFds];
    int count = 0;
    ~Passed() {
      for (int i = 0; i < count; ++i)
        if (fds[i] >= 0) close(fds[i]);
    }
  } passed;
  const ssize_t n = receive_with_fds(fd, bytes, inbox_.size(), passed.fds, kMaxPassedFds, &passed.count, MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  if (n <= 0 && !(n < 0 && errno == EMSGSIZE)) {
    drop_client(fd);
    return false;
  }
  if (n < 0) return true;  // (too large: dropped, its descriptors closed)
  Client& c = clients_[fd];
  switch (bytes[0]) {
    case kAttest:
      attest(fd, c, bytes, static_cast<size_t>(n), passed.fds, passed.count);
      return clients_.count(fd) != 0;
    case kRejoin:
      rejoin(fd, c, bytes, static_cast<size_t>(n), passed.fds, passed.count);
      return clients_.count(fd) != 0;
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
    case kChannel:
      open_channel(fd, c, bytes, static_cast<size_t>(n));
      return clients_.count(fd) != 0;
    default:
      lease(fd, c, bytes, static_cast<size_t>(n));
      return clients_.count(fd) != 0;
  }
}

// Whether `slot` may be leased to `c` now: no connection holds it; it is
// not in quarantine (its last holder had rings to other processes, which
// must first hear that it left: what comes out of those rings is taken as
// that slot's); and a previous service's holder (state file) has had its
// grace period to come back, unless `c` is that process. Else *holder is
// whose it is.
bool Service::may_lease(uint32_t slot, const Client& c, uint32_t* holder) const {
  if (by_slot_[slot] >= 0) {
    *holder = clients_.at(by_slot_[slot]).uid;
    return false;
  }
  const uint64_t now = monotonic_ns();
  const Reserved& q = reserved_[slot];
  if (q.until_ns > now && !(q.pid && q.pid == c.pid && q.uid == c.uid)) {
    *holder = q.uid;
    return false;
  }
  for (const PendingClose& p : pending_closes_)
    if (p.closed_slot == slot) {
      *holder = UINT32_MAX - 1;
      return false;
    }
  return true;
}

void Service::take_lease(int fd, Client& c, uint32_t slot) {
  c.slot = slot;
  by_slot_[slot] = fd;
  reserved_[slot] = Reserved{};
}

void Service::lease(int fd, Client& c, const uint8_t* bytes, size_t n) {
  Lease req;
  std::memcpy(&req, bytes, std::min(sizeof req, n));
  LeaseReply rep;
  rep.slot = req.slot;
  if (n != sizeof req || req.type != kLease || req.slot == 0 || req.slot >= shm::kHomeSlots) {
    rep.holder_uid = UINT32_MAX - 1;  // not a slot anyone can have
  } else if (c.slot) {
    rep.holder_uid = c.uid;  // one lease per process
  } else if (uint32_t holder = 0; !may_lease(req.slot, c, &holder)) {
    rep.holder_uid = holder;
  } else {
    rep.granted = 1;
    take_lease(fd, c, req.slot);
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
void Service::attest(int fd, Client& c, const uint8_t* bytes, size_t n, int* fds, int count) {
  Attest m;
  std::memcpy(&m, bytes, std::min(sizeof m, n));
  AttestReply rep;
  const bool ok = n == sizeof m && c.slot && m.v4 <= 1 && m.v6 <= 1 && count == m.v4 + m.v6 && count > 0 &&
                  vouch(c, m.v4 ? &fds[0] : nullptr, m.v6 ? &fds[count - 1] : nullptr, &rep);
  if (!ok) ++n_.forged_source;
  rep.granted = ok;
  if (send(fd, &rep, sizeof rep, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof rep)) drop_client(fd);
}

// Takes the sockets a process sends from (nullptr: none of that family;
// a taken one's entry becomes -1) and vouches for their ports as its
// slot's; false, and takes none, when one is not a socket only it can send
// from, in this network namespace, or its port is another's.
bool Service::vouch(Client& c, int* send4, int* send6, AttestReply* rep) {
  int* const fds[2] = {send4, send6};
  uint16_t ports[2] = {0, 0};
  for (int f = 0; f < 2; ++f) {
    if (!fds[f]) continue;
    ports[f] = exclusive_udp_port(*fds[f], f == 0 ? AF_INET : AF_INET6);
    const uint16_t holder = ports[f] ? table_->slot[f][ports[f]].load(std::memory_order_relaxed) : 0;
    if (!ports[f] || (holder && holder != c.slot) || !in_our_namespace(*fds[f])) return false;
  }
  for (int f = 0; f < 2; ++f) {
    if (!fds[f]) continue;
    if (c.attested[f] >= 0) {  // (a second attest replaces the first)
      table_->slot[f][c.attested_port[f]].store(0, std::memory_order_release);
      close(c.attested[f]);
    }
    c.attested[f] = std::exchange(*fds[f], -1);
    c.attested_port[f] = ports[f];
    table_->slot[f][ports[f]].store(static_cast<uint16_t>(c.slot), std::memory_order_release);
    if (rep) (f == 0 ? rep->port4 : rep->port6) = ports[f];
  }
  return true;
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

constexpr uint64_t kPortLingerNs = 2'000'000'000;

// A process that left: its ports stay held and vouched for kPortLingerNs
// more. What it sent as it exited may still wait in a receiver's queue (a
// ping-pong's last ACK, held until the QP was destroyed, then sent) and
// must not be taken for a forgery. No one else can send from those ports
// meanwhile: we hold them.
void Service::linger_attested(Client& c) {
  const uint64_t until = monotonic_ns() + kPortLingerNs;
  for (int f = 0; f < 2; ++f) {
    if (c.attested[f] < 0) continue;
    lingering_.push_back(Lingering{std::exchange(c.attested[f], -1), f, c.attested_port[f], until});
  }
}

// The lingering ports whose time is up by `now_ns` (all, at UINT64_MAX):
// the table forgets them before their sockets go.
void Service::end_lingering(uint64_t now_ns) {
  std::erase_if(lingering_, [&](const Lingering& l) {
    if (l.until_ns > now_ns) return false;
    if (table_) table_->slot[l.family][l.port].store(0, std::memory_order_release);
    close(l.fd);
    return true;
  });
}

// How long the loop may sleep: for ever, unless a notice waits to be
// retried or a lingering port is due.
int Service::wait_ms() const {
  int ms = pending_closes_.empty() ? -1 : 50;
  if (!lingering_.empty()) {
    const uint64_t now = monotonic_ns();
    uint64_t first = UINT64_MAX;
    for (const Lingering& l : lingering_) first = std::min(first, l.until_ns);
    const int due = first <= now ? 0 : static_cast<int>((first - now) / 1'000'000 + 1);
    ms = ms < 0 ? due : std::min(ms, due);
  }
  return ms;
}

// A process that used a service before (this one's predecessor, which
// stopped) or held the port itself until now asks for its slot again, with
// the sockets it has (hostd::Rejoin): its members of the port's groups go
// on receiving (the kernel steers to them again), its sending ports are
// vouched for again. Its QPs keep their numbers, so its connections last.
void Service::rejoin(int fd, Client& c, const uint8_t* bytes, size_t n, int* fds, int count) {
  Rejoin m;
  std::memcpy(&m, bytes, std::min(sizeof m, n));
  LeaseReply rep;
  rep.slot = m.slot;
  const bool well_formed = n == sizeof m && m.member4 <= 1 && m.member6 <= 1 && m.send4 <= 1 && m.send6 <= 1 &&
                           count == m.member4 + m.member6 + m.send4 + m.send6 && m.slot && m.slot < shm::kHomeSlots &&
                           !c.slot;
  uint32_t holder = 0;
  if (!well_formed || !may_lease(m.slot, c, &holder)) {
    rep.holder_uid = !well_formed ? UINT32_MAX - 1 : holder;
    if (send(fd, &rep, sizeof rep, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof rep)) drop_client(fd);
    return;  // (the descriptors are closed by serve_client)
  }
  int i = 0;
  int* const member4 = m.member4 ? &fds[i++] : nullptr;
  int* const member6 = m.member6 ? &fds[i++] : nullptr;
  int* const send4 = m.send4 ? &fds[i++] : nullptr;
  int* const send6 = m.send6 ? &fds[i++] : nullptr;
  take_lease(fd, c, m.slot);
  bool steered = false;
  if (steering()) {
    steered = member4 && is_port_member(*member4, AF_INET) && steer4_.steer(c.slot, *member4);
    if (steered && member6 && is_port_member(*member6, AF_INET6)) steer6_.steer(c.slot, *member6);
  }
  // (The members stay the process's; ours are closed by serve_client.)
  if (!vouch(c, send4, send6, nullptr)) ++n_.forged_source;
  rep.granted = 1;
  if (opt_.verbose)
    std::fprintf(stderr, "softverbs-hostd: pid %d (uid %u) rejoined with slot %u%s\n", c.pid, c.uid, c.slot,
                 steered ? ", its sockets steered again" : "");
  // New members only for a process that had none (it held the port
  // itself): one that passed its own keeps them.
  const bool sent = send(fd, &rep, sizeof rep, MSG_DONTWAIT | MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof rep);
  if (!sent || !send_sockets(fd, c.slot, /*members=*/!member4 && !member6, steered)) drop_client(fd);
}

namespace {

// A ring file (shm/peer_ring.h): sealed at its size, so that neither
// process can shrink it under the other.
int new_ring() {
  const int fd = memfd_create("softverbs-peer-ring", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) return -1;
  if (ftruncate(fd, shm::kPeerRingFileBytes) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

// A process asks for rings to another user's process (hostd::ChannelRequest):
// both get their halves, each told the other's slot (and so vouched for, as
// a port is in the attestation table), with a bell of their own to watch
// and the peer's to ring (one eventfd per direction and pair: a peer can
// only steal its own wake-ups). Once per pair; at most kMaxChannels a
// process; nothing for a slot no connection leased.
void Service::open_channel(int fd, Client& c, const uint8_t* bytes, size_t n) {
  ChannelRequest m;
  std::memcpy(&m, bytes, std::min(sizeof m, n));
  if (n != sizeof m || !c.slot || !m.slot || m.slot >= shm::kHomeSlots || m.slot == c.slot) return;
  const int peer_fd = by_slot_[m.slot];
  if (peer_fd < 0) return;
  Client& peer = clients_[peer_fd];
  const auto key = std::minmax(c.slot, m.slot);
  if (channel_pairs_.count(key) || c.channels >= kMaxChannels || peer.channels >= kMaxChannels) return;
  const int ab = new_ring(), ba = new_ring();
  const int bell_a = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK), bell_b = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (ab >= 0 && ba >= 0 && bell_a >= 0 && bell_b >= 0) {
    // The peer first: if it cannot be told (its queue is full), nothing is
    // made, and neither process loses anything. If then the asker cannot
    // be told, the peer hears that the rings are gone.
    if (send_channel(peer_fd, c, ba, ab, bell_a, bell_b)) {
      if (send_channel(fd, peer, ab, ba, bell_b, bell_a)) {
        channel_pairs_.insert(key);
        ++c.channels;
        ++peer.channels;
        if (opt_.verbose)
          std::fprintf(stderr, "softverbs-hostd: rings between slot %u (uid %u) and slot %u (uid %u)\n", c.slot,
                       c.uid, peer.slot, peer.uid);
      } else {
        notify_closed(m.slot, c.slot);
      }
    }
  }
  for (int x : {ab, ba, bell_a, bell_b})
    if (x >= 0) close(x);
}

// Tells the process on `fd` of rings to `peer`: it writes `ring_out`,
// reads `ring_in`, rings `bell_out` when it put something the peer had
// emptied, and watches `bell_in`.
bool Service::send_channel(int fd, const Client& peer, int ring_out, int ring_in, int bell_out, int bell_in) {
  ChannelOpen m;
  m.peer_slot = peer.slot;
  m.peer_pid = static_cast<uint32_t>(peer.pid);
  const int fds[4] = {ring_out, ring_in, bell_out, bell_in};
  return send_with_fds(fd, &m, sizeof m, fds, 4, MSG_DONTWAIT);
}

// Tells the process of `to_slot` that the one of `closed_slot` (its rings'
// peer) is gone. A notice its full queue refuses waits (retry_closes), and
// `closed_slot` is not leased again until every notice went: what comes
// out of those rings is taken as that slot's.
void Service::notify_closed(uint32_t to_slot, uint32_t closed_slot) {
  pending_closes_.push_back(PendingClose{to_slot, closed_slot});
  retry_closes();
}

void Service::retry_closes() {
  std::erase_if(pending_closes_, [&](const PendingClose& p) {
    const int ofd = by_slot_[p.to_slot];
    if (ofd < 0) return true;  // (it is gone too)
    ChannelOpen m;
    m.type = kChannelClosed;
    m.peer_slot = p.closed_slot;
    return send(ofd, &m, sizeof m, MSG_DONTWAIT | MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof m);
  });
}

// A process left: each peer it had rings with is told (it closes them; its
// next datagrams for that slot go by UDP, to whoever leases it next).
void Service::close_channels_of(const Client& c) {
  if (!c.slot) return;
  for (auto it = channel_pairs_.begin(); it != channel_pairs_.end();) {
    if (it->first != c.slot && it->second != c.slot) {
      ++it;
      continue;
    }
    const uint32_t other = it->first == c.slot ? it->second : it->first;
    it = channel_pairs_.erase(it);
    const int ofd = by_slot_[other];
    if (ofd < 0) continue;
    if (Client& o = clients_[ofd]; o.channels) --o.channels;
    notify_closed(other, c.slot);
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
  if (auto r = reserved_claims_.find(std::string(key)); r != reserved_claims_.end()) {
    if (r->second.until_ns > monotonic_ns() && !(r->second.pid == c.pid && r->second.uid == c.uid)) {
      rep.holder_uid = r->second.uid;  // kept for its CM, whose service restarted
      if (send(fd, &rep, sizeof rep, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof rep)) drop_client(fd);
      return;
    }
    reserved_claims_.erase(r);
  }
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
  // (By pid, and the uid checked: a connection made by an earlier process
  // of that pid, kept by another, is not the claimant's.)
  if (auto p = network_by_pid_.find(c->second.pid);
      p != network_by_pid_.end() && clients_.count(p->second) && clients_.at(p->second).uid == c->second.uid)
    return p->second;
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
  return src_qp == 1 || (slot && shm::home_slot_of_qpn(src_qp) == slot);
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
      } else if (!sent_by_this_host(infos[i])) {
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

namespace {

// How long a restarted service keeps the slots and CM keys of the previous
// one's processes for them to come back (they try every 50 ms).
constexpr uint64_t kRestartGraceNs = 30'000'000'000;

// The state file of this network namespace's service, in `dir`.
std::string state_path(const std::string& dir) {
  struct stat st;
  if (dir.empty() || stat("/proc/self/ns/net", &st) != 0) return "";
  return dir + "/net" + std::to_string(st.st_ino) + ".state";
}

std::string hex(std::string_view s) {
  static const char* const digits = "0123456789abcdef";
  std::string out;
  for (unsigned char ch : s) {
    out += digits[ch >> 4];
    out += digits[ch & 15];
  }
  return out;
}

bool unhex(const std::string& h, std::string* out) {
  if (h.size() % 2) return false;
  out->clear();
  for (size_t i = 0; i < h.size(); i += 2) {
    const auto nib = [](char ch) { return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1; };
    const int hi = nib(h[i]), lo = nib(h[i + 1]);
    if (hi < 0 || lo < 0) return false;
    *out += static_cast<char>(hi << 4 | lo);
  }
  return true;
}

// Whether process `pid` lives now, as `uid`, in our network namespace: a
// state file's entry is kept only for such a process (the file may be a
// namespace's long gone, whose inode number a new one got).
bool alive_here(pid_t pid, uint32_t uid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  struct stat st;
  char ours[64] = {}, theirs[64] = {};
  return pid > 0 && stat(proc.c_str(), &st) == 0 && st.st_uid == uid &&
         readlink("/proc/self/ns/net", ours, sizeof ours - 1) > 0 &&
         readlink((proc + "/ns/net").c_str(), theirs, sizeof theirs - 1) > 0 && std::strcmp(ours, theirs) == 0;
}

}  // namespace

// At a stop (SIGTERM: a restart, or the end): who holds which slot and CM
// key, so that the next service keeps them for those processes a while.
// Without it (a service that was killed) anyone may take them first. Keys
// are written in hex: they are what clients sent.
void Service::save_state() const {
  const std::string path = state_path(opt_.state_dir);
  if (path.empty()) return;
  bool any = false;
  for (const auto& [fd, c] : clients_) any |= c.slot != 0;
  if (!any) {  // (nothing to keep: no file for the next one to read)
    unlink(path.c_str());
    return;
  }
  mkdir(opt_.state_dir.c_str(), 0700);
  const std::string tmp = path + ".new";
  FILE* f = std::fopen(tmp.c_str(), "w");
  if (!f) return;
  for (const auto& [fd, c] : clients_)
    if (c.slot) std::fprintf(f, "slot %u %u %d\n", c.slot, c.uid, static_cast<int>(c.pid));
  claims_.for_each([&](const std::string& key, int owner, uint32_t uid) {
    auto it = clients_.find(owner);
    if (it != clients_.end()) std::fprintf(f, "claim %u %d %s\n", uid, static_cast<int>(it->second.pid), hex(key).c_str());
  });
  if (std::fclose(f) == 0) rename(tmp.c_str(), path.c_str());
}

// At a start: what the previous service saved, kept for kRestartGraceNs.
// (The file is ours: a directory only root may write.)
void Service::load_state() {
  const std::string path = state_path(opt_.state_dir);
  if (path.empty()) return;
  struct stat st;
  if (lstat(opt_.state_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 022))
    return;
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return;
  const uint64_t until = monotonic_ns() + kRestartGraceNs;
  char line[600];
  size_t slots = 0, keys = 0;
  while (std::fgets(line, sizeof line, f)) {
    unsigned slot, uid;
    int pid;
    char key[300];
    std::string k;
    if (std::sscanf(line, "slot %u %u %d", &slot, &uid, &pid) == 3 && slot && slot < shm::kHomeSlots) {
      if (!alive_here(pid, uid)) continue;
      reserved_[slot] = Reserved{uid, pid, until};
      ++slots;
    } else if (std::sscanf(line, "claim %u %d %299s", &uid, &pid, key) == 3 && unhex(key, &k) && !k.empty() &&
               alive_here(pid, uid)) {
      reserved_claims_[k] = Reserved{uid, pid, until};
      ++keys;
    }
  }
  std::fclose(f);
  unlink(path.c_str());
  if (opt_.verbose)
    std::fprintf(stderr, "softverbs-hostd: kept %zu slots and %zu CM keys of the previous service's processes\n", slots,
                 keys);
}

void Service::run(volatile int* stop) {
  constexpr int kEvents = 256;
  epoll_event events[kEvents];
  while (!*stop) {
    const int ready = epoll_wait(epoll_, events, kEvents, wait_ms());
    if (!pending_closes_.empty()) retry_closes();
    if (!lingering_.empty()) end_lingering(monotonic_ns());
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
