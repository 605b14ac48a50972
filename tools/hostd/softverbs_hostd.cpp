// softverbs-hostd: the optional host service (shm/host_service.h,
// docs/ARCHITECTURE.md "Security"). One per network namespace, started
// before any user can take UDP port 4791, run by root (or by the uid
// processes are told in SOFTVERBS_HOSTD_UID). It
//  - owns the RoCE port alone (no SO_REUSEPORT: nobody can share it), so
//    no other user receives the packets meant for softverbs processes;
//  - leases registry slots host-wide over its abstract SOCK_SEQPACKET
//    socket: a QPN (slot << 16 | index) then names one QP on the host, and
//    a lease dies with its connection;
//  - hands each datagram, by its BTH DestQP, to the process holding that
//    QPN's slot, over that connection. It checks nothing else (the process
//    checks the ICRC and everything after, as it does for its own socket).
// Users' processes then reach each other's QPs through it (loopback UDP),
// never through shared memory.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <map>
#include <string>
#include <set>
#include <vector>

#include "ibcm/gsi_mailbox.h"
#include "ibcm/mad_header.h"
#include "net/roce_datagram.h"
#include "net/roce_header.h"
#include "net/roce_frame.h"
#include "net/roce_opcode.h"
#include "net/udp_sport.h"
#include "shm/host_service.h"
#include "shm/layout.h"
#include "transport/roce_socket.h"
#include "util/short_slice.h"
#include "util/host_service_socket.h"
#include "util/unix_socket_address.h"

namespace {

using namespace sv;
namespace hostd = sv::hostd;

volatile sig_atomic_t g_stop = 0;
bool g_verbose = false;
// A CM holds a mailbox per listener and per connection: a bound on what
// one process can make the service remember.
constexpr long kMaxClaimsPerConnection = 65536;

struct Client {
  uint32_t uid = 0;
  pid_t pid = 0;
  uint32_t slot = 0;     // 0: no lease yet
  bool network = false;  // its network thread runs: it takes CM MADs and multicast
};

struct Counters {
  uint64_t forwarded = 0, no_owner = 0, owner_busy = 0, malformed = 0;
  uint64_t local_udp = 0;       // UDP from this host's own addresses (any local user can send those)
  uint64_t forged_source = 0;   // a process's UD datagram naming a source QP not in its slot
};

class Service {
 public:
  bool open();
  void run();
  const Counters& counters() const { return n_; }

 private:
  void accept_clients();
  bool serve_client(int fd);  // false: nothing more to read from it now
  void drop_client(int fd);
  void receive_datagrams(int fd, uint16_t port);
  void route(const uint8_t* data, size_t len, uint16_t seg, const DatagramInfo& info);
  void route_one(const uint8_t* data, size_t len, const DatagramInfo& info);
  bool send_to(int fd, const uint8_t* data, size_t len, uint16_t seg, const DatagramInfo& info);
  void route_mad(const uint8_t* data, size_t len, const DatagramInfo& info);
  int mad_reader_for(const Client& owner) const;
  void claim(int fd, const uint8_t* bytes, size_t n, bool release);
  void from_process(const Client& c, const uint8_t* bytes, size_t n);
  bool local_address(const in6_addr& a);

  RoceSocket sock_;
  int listener_ = -1;
  std::map<int, Client> clients_;
  int by_slot_[shm::kMaxProcs];  // the client fd holding each slot's lease; -1: none
  std::map<std::string, int> claims_;  // CM mailbox key -> the connection that claimed it
  std::vector<uint8_t> inbox_ = std::vector<uint8_t>(sizeof(hostd::DatagramHeader) + 65536);
  uint16_t stamp_ = 0;  // while routing a process's datagram: its leased slot
  Counters n_;
};

bool Service::open() {
  std::fill(std::begin(by_slot_), std::end(by_slot_), -1);
  if (!sock_.open_exclusive()) {
    std::fprintf(stderr, "softverbs-hostd: cannot bind UDP port %u in this network namespace: %s\n",
                 net::kRoceUdpPort, std::strerror(errno));
    return false;
  }
  listener_ = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  socklen_t len;
  const sockaddr_un a = abstract_unix_address(kHostServiceSocket, &len);
  if (listener_ < 0 || bind(listener_, reinterpret_cast<const sockaddr*>(&a), len) != 0 || listen(listener_, 64) != 0) {
    std::fprintf(stderr, "softverbs-hostd: cannot bind @%s: %s%s\n", kHostServiceSocket, std::strerror(errno),
                 errno == EADDRINUSE ? " (another host service runs in this network namespace)" : "");
    return false;
  }
  return true;
}

void Service::accept_clients() {
  for (;;) {
    const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      close(fd);
      continue;
    }
    int size = 4 << 20;  // room for a burst while the process's network thread is not running
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
    clients_[fd] = Client{cred.uid, cred.pid, 0};
    if (g_verbose) std::fprintf(stderr, "softverbs-hostd: pid %d (uid %u) connected\n", cred.pid, cred.uid);
  }
}

void Service::drop_client(int fd) {
  auto it = clients_.find(fd);
  if (it == clients_.end()) return;
  if (it->second.slot && by_slot_[it->second.slot] == fd) by_slot_[it->second.slot] = -1;
  if (g_verbose)
    std::fprintf(stderr, "softverbs-hostd: pid %d (uid %u) left slot %u\n", it->second.pid, it->second.uid,
                 it->second.slot);
  clients_.erase(it);
  close(fd);
  std::erase_if(claims_, [&](const auto& kv) { return kv.second == fd; });
}

// A message from a process: a lease request (one slot per connection, free
// on the whole host), or word that its network thread runs.
bool Service::serve_client(int fd) {
  uint8_t* const bytes = inbox_.data();
  const ssize_t n = recv(fd, bytes, inbox_.size(), MSG_DONTWAIT);
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  if (n <= 0) {
    drop_client(fd);
    return false;
  }
  Client& c = clients_[fd];
  if (bytes[0] == hostd::kNetworkUp) {
    c.network = true;
    return true;
  }
  if (bytes[0] == hostd::kClaim || bytes[0] == hostd::kRelease) {
    claim(fd, bytes, static_cast<size_t>(n), bytes[0] == hostd::kRelease);
    return clients_.count(fd) != 0;
  }
  if (bytes[0] == hostd::kSend) {
    from_process(c, bytes, static_cast<size_t>(n));
    return true;
  }
  hostd::Lease req;
  std::memcpy(&req, bytes, std::min(sizeof req, static_cast<size_t>(n)));
  hostd::LeaseReply rep;
  rep.slot = req.slot;
  if (n != static_cast<ssize_t>(sizeof req) || req.type != hostd::kLease || req.slot == 0 ||
      req.slot >= shm::kMaxProcs) {
    rep.holder_uid = UINT32_MAX - 1;  // not a slot anyone can have
  } else if (c.slot) {
    rep.holder_uid = c.uid;  // one lease per process
  } else if (by_slot_[req.slot] >= 0) {
    rep.holder_uid = clients_[by_slot_[req.slot]].uid;
  } else {
    rep.granted = 1;
    c.slot = req.slot;
    by_slot_[req.slot] = fd;
    if (g_verbose) std::fprintf(stderr, "softverbs-hostd: pid %d (uid %u) leased slot %u\n", c.pid, c.uid, c.slot);
  }
  if (send(fd, &rep, sizeof rep, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof rep)) {
    drop_client(fd);
    return false;
  }
  return true;
}

// A CM claims a mailbox key (or lets it go). A key another connection
// holds is refused, with its uid.
void Service::claim(int fd, const uint8_t* bytes, size_t n, bool release) {
  hostd::Claim c;
  std::memcpy(&c, bytes, std::min(sizeof c, n));
  if (n != sizeof c || c.length == 0 || c.length > sizeof c.key) return;  // (the CM waits, then gives up)
  const std::string key(c.key, c.length);
  auto it = claims_.find(key);
  if (release) {
    if (it != claims_.end() && it->second == fd) claims_.erase(it);
    return;
  }
  hostd::ClaimReply rep;
  if (it != claims_.end() && it->second != fd) {
    rep.holder_uid = clients_[it->second].uid;
  } else if (std::count_if(claims_.begin(), claims_.end(), [&](const auto& kv) { return kv.second == fd; }) >=
             kMaxClaimsPerConnection) {
    rep.holder_uid = UINT32_MAX - 1;
  } else {
    rep.granted = 1;
    claims_[key] = fd;
  }
  if (send(fd, &rep, sizeof rep, MSG_DONTWAIT | MSG_NOSIGNAL) != static_cast<ssize_t>(sizeof rep)) drop_client(fd);
}

// The connection that reads CM MADs for the process that made `claimant`
// (its own datagram connection), else for another of its user's.
int Service::mad_reader_for(const Client& claimant) const {
  int same_user = -1;
  for (const auto& [fd, c] : clients_) {
    if (!c.slot || !c.network) continue;
    if (c.pid == claimant.pid) return fd;
    if (c.uid == claimant.uid && same_user < 0) same_user = fd;
  }
  return same_user;
}

// A datagram to QP1: a CM MAD goes to the user whose CM claimed the
// mailbox it is for (its process posts it there). One for no claimed
// mailbox goes to some process whose network thread runs, which answers
// as the CM of a host answers for nobody (a REJ: invalid service ID).
void Service::route_mad(const uint8_t* data, size_t len, const DatagramInfo& info) {
  constexpr size_t kMadAt = net::kBthBytes + 8;  // after the DETH
  if (len >= kMadAt + sv::ibcm::kMadSize + net::kIcrcBytes) {
    for (const std::string& name : sv::ibcm::mailboxes_for({data + kMadAt, sv::ibcm::kMadSize})) {
      auto it = claims_.find(sv::ibcm::mailbox_key(name));
      if (it == claims_.end()) continue;
      const int reader = mad_reader_for(clients_[it->second]);
      if (reader >= 0) send_to(reader, data, len, 0, info);
      else ++n_.no_owner;
      return;
    }
  }
  for (const auto& [fd, c] : clients_)
    if (c.slot && c.network) {
      send_to(fd, data, len, 0, info);
      return;
    }
  ++n_.no_owner;
}

// A datagram from a process of this host (kSend), for a QP of this host:
// routed as one from the wire, stamped with the sender's slot, which the
// receiver checks against its peer's. A UD datagram must name a source QP
// of the sender's own slot, or QP1 (a CM MAD, which librdmacm sends over
// its own connection, without a slot).
void Service::from_process(const Client& c, const uint8_t* bytes, size_t n) {
  hostd::DatagramHeader h;
  if (n < sizeof h + net::kBthBytes + net::kIcrcBytes) {
    ++n_.malformed;
    return;
  }
  std::memcpy(&h, bytes, sizeof h);
  const uint8_t* data = bytes + sizeof h;
  const size_t len = n - sizeof h;
  // (A CM, which sends its MADs from QP1, may have no slot of its own.)
  const bool ud = (data[0] & net::kTransportMask) == net::kTransportUd;
  const uint32_t src_qp = ud && len >= net::kBthBytes + 8 ? net::be::get24(data + net::kBthBytes + 5) : 0;
  if (ud ? src_qp != 1 && (!c.slot || shm::qpn_slot(src_qp) != c.slot) : !c.slot) {
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

// An address of this host (a GID of its table, or any loopback address):
// UDP from one can come from any local user, not only the wire.
bool Service::local_address(const in6_addr& a) {
  if (net::is_v4_mapped(a)) {
    if (a.s6_addr[12] == 127) return true;
  } else if (IN6_IS_ADDR_LOOPBACK(&a)) {
    return true;
  }
  return interface_of(a) != 0;
}

bool Service::send_to(int fd, const uint8_t* data, size_t len, uint16_t seg, const DatagramInfo& info) {
  hostd::DatagramHeader h;
  h.flags = stamp_ ? hostd::kFromProcess : 0;
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

uint32_t dest_qpn(const uint8_t* datagram) { return net::be::get24(datagram + 5); }

// One datagram (from its BTH on, ICRC included).
void Service::route_one(const uint8_t* data, size_t len, const DatagramInfo& info) {
  if (len < net::kBthBytes + net::kIcrcBytes) {
    ++n_.malformed;
    return;
  }
  const uint32_t qpn = dest_qpn(data);
  if (qpn == 1) {
    route_mad(data, len, info);
    return;
  }
  if (qpn == shm::kMulticastQpn) {
    // Every process whose network thread runs gives it to its own members.
    bool sent = false;
    for (const auto& [fd, c] : clients_)
      if (c.slot && c.network) sent |= send_to(fd, data, len, 0, info);
    if (!sent) ++n_.no_owner;
    return;
  }
  const int fd = by_slot_[shm::qpn_slot(qpn)];
  if (fd < 0) {
    ++n_.no_owner;
    return;
  }
  send_to(fd, data, len, 0, info);
}

// A received buffer: one datagram, or with UDP GRO several of one flow
// (`seg` bytes each, the last may be shorter). When they are all for one
// process's QPs they go to it in one message.
void Service::route(const uint8_t* data, size_t len, uint16_t seg, const DatagramInfo& info) {
  if (seg && len > seg) {
    int owner = -1;
    bool whole = true;
    for (size_t off = 0; off < len && whole; off += seg) {
      const size_t n = std::min<size_t>(seg, len - off);
      const uint32_t qpn = n >= net::kBthBytes ? dest_qpn(data + off) : 0;
      const int fd = qpn > 1 && qpn != shm::kMulticastQpn ? by_slot_[shm::qpn_slot(qpn)] : -1;
      whole = fd >= 0 && (off == 0 || fd == owner);
      owner = fd;
    }
    if (whole) {
      send_to(owner, data, len, seg, info);
      return;
    }
    for (size_t off = 0; off < len; off += seg) route_one(data + off, std::min<size_t>(seg, len - off), info);
    return;
  }
  route_one(data, len, info);
}

void Service::receive_datagrams(int fd, uint16_t) {
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
      } else if (local_address(infos[i].src)) {
        ++n_.local_udp;  // local processes come through their connection (kSend)
      } else {
        route(bufs[i], static_cast<size_t>(lens[i]), segs[i], infos[i]);
      }
    }
    if (got < kSlots) return;
  }
}

void Service::run() {
  std::vector<pollfd> fds;
  while (!g_stop) {
    fds.clear();
    fds.push_back({listener_, POLLIN, 0});
    fds.push_back({sock_.fd4(), POLLIN, 0});
    fds.push_back({sock_.fd6(), POLLIN, 0});
    for (const auto& [fd, c] : clients_) fds.push_back({fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      std::perror("softverbs-hostd: poll");
      return;
    }
    if (fds[1].revents & POLLIN) receive_datagrams(sock_.fd4(), net::kRoceUdpPort);
    if (fds[2].revents & POLLIN) receive_datagrams(sock_.fd6(), net::kRoceUdpPort);
    // (Each readable client's messages, up to a bound: a burst of its
    // datagrams is routed in one wake-up.)
    for (size_t i = 3; i < fds.size(); ++i)
      if (fds[i].revents & (POLLIN | POLLHUP | POLLERR))
        for (int k = 0; k < 64 && serve_client(fds[i].fd); ++k) {
        }
    if (fds[0].revents & POLLIN) accept_clients();
  }
}

void on_signal(int) { g_stop = 1; }

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-v") || !std::strcmp(argv[i], "--verbose")) {
      g_verbose = true;
    } else {
      std::fprintf(stderr,
                   "usage: softverbs-hostd [-v]\n"
                   "The softverbs host service for this network namespace: owns UDP port %u, leases QP number\n"
                   "ranges host-wide and hands each RoCEv2 packet to the process whose QP it is for. Run it as root\n"
                   "(or as the uid set in users' SOFTVERBS_HOSTD_UID) before users start RDMA programs.\n",
                   net::kRoceUdpPort);
      return 2;
    }
  }
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Woken by a packet, the service must get a core now, though polling
  // applications hold them all (as the processes' network threads do).
  request_short_slice(100'000);
  Service s;
  if (!s.open()) return 1;
  std::fprintf(stderr, "softverbs-hostd: serving UDP port %u and @%s in this network namespace\n", net::kRoceUdpPort,
               kHostServiceSocket);
  s.run();
  const Counters& n = s.counters();
  std::fprintf(stderr,
               "softverbs-hostd: stopped; %llu datagrams forwarded, %llu for no leased QP, %llu lost to a full "
               "process queue, %llu malformed, %llu UDP from a local address dropped, %llu with a forged source QP\n",
               static_cast<unsigned long long>(n.forwarded), static_cast<unsigned long long>(n.no_owner),
               static_cast<unsigned long long>(n.owner_busy), static_cast<unsigned long long>(n.malformed),
               static_cast<unsigned long long>(n.local_udp), static_cast<unsigned long long>(n.forged_source));
  return 0;
}
