#include "transport/roce_socket.h"

#include <net/if.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/device_attr.h"
#include "core/gid_table.h"
#include "hostd/datagram_route.h"
#include "net/roce_datagram.h"
#include "net/roce_frame.h"
#include "net/udp_sport.h"
#include "util/clock.h"
#include "util/knobs.h"
#include "util/log.h"
#include "util/kernel_socket.h"

namespace sv {
namespace {

// Room for the largest RoCE datagram in the socket buffers: a burst of a
// send window (transport/roce_sender.h) must not overflow them.
constexpr int kSocketBufferBytes = 4 << 20;

void set_int(int fd, int level, int name, int value) { setsockopt(fd, level, name, &value, sizeof value); }

// `addr` port `port` as the socket calls of its family take it; its length.
socklen_t socket_address(const in6_addr& addr, uint16_t port, sockaddr_storage* ss) {
  *ss = sockaddr_storage{};
  if (net::is_v4_mapped(addr)) {
    auto* sin = reinterpret_cast<sockaddr_in*>(ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    std::memcpy(&sin->sin_addr, addr.s6_addr + 12, 4);
    return sizeof *sin;
  }
  auto* sin6 = reinterpret_cast<sockaddr_in6*>(ss);
  sin6->sin6_family = AF_INET6;
  sin6->sin6_port = htons(port);
  sin6->sin6_addr = addr;
  return sizeof *sin6;
}

// A UDP socket of `family` bound to `port` (0: any) at `local` (nullptr:
// every address); -1 on failure.
int bound_socket(int family, uint16_t port, bool shared = true, const in6_addr* local = nullptr) {
  int fd = kernel_socket(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  // Every process of the user binds the RoCE port together: the kernel
  // gives each flow to one of them (by a hash of the addresses), which
  // forwards what is for another process (roce_forward.h). When one exits,
  // its flows move to another at once.
  if (port && shared) set_int(fd, SOL_SOCKET, SO_REUSEPORT, 1);
  if (family == AF_INET6) set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
  sockaddr_storage ss{};
  const socklen_t len =
      socket_address(local ? *local : family == AF_INET ? net::v4_mapped(0) : in6addr_any, port, &ss);
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  set_int(fd, SOL_SOCKET, SO_RCVBUF, kSocketBufferBytes);
  set_int(fd, SOL_SOCKET, SO_SNDBUF, kSocketBufferBytes);
  // GSO sends from a peer arrive as one buffer, cut apart here (drain()).
  if (knobs().udp_offload) set_int(fd, SOL_UDP, UDP_GRO, 1);
  // Our multicast sends do not come back to this host: its members got
  // theirs in shared memory (transport/shm_transport.cpp).
  set_int(fd, family == AF_INET ? IPPROTO_IP : IPPROTO_IPV6, family == AF_INET ? IP_MULTICAST_LOOP : IPV6_MULTICAST_LOOP,
          0);
  if (family == AF_INET) {
    set_int(fd, IPPROTO_IP, IP_MTU_DISCOVER, IP_PMTUDISC_DO);  // DF: IP ID 0, as the ICRC assumed
    set_int(fd, IPPROTO_IP, IP_PKTINFO, 1);
    set_int(fd, IPPROTO_IP, IP_RECVTOS, 1);
    set_int(fd, IPPROTO_IP, IP_RECVTTL, 1);
  } else {
    set_int(fd, IPPROTO_IPV6, IPV6_MTU_DISCOVER, IPV6_PMTUDISC_DO);
    set_int(fd, IPPROTO_IPV6, IPV6_RECVPKTINFO, 1);
    set_int(fd, IPPROTO_IPV6, IPV6_RECVTCLASS, 1);
    set_int(fd, IPPROTO_IPV6, IPV6_RECVHOPLIMIT, 1);
  }
  return fd;
}

}  // namespace

int roce_member_socket(int family) {
  const int fd = bound_socket(family, net::kRoceUdpPort, /*shared=*/true);
  // (As root, past net.core.rmem_max: the member's owner is the service.)
  if (fd >= 0) set_int(fd, SOL_SOCKET, SO_RCVBUFFORCE, kSocketBufferBytes);
  return fd;
}

int connected_roce_socket(const in6_addr& local, const in6_addr& remote, uint16_t remote_port) {
  const int family = net::is_v4_mapped(remote) ? AF_INET : AF_INET6;
  if (net::is_v4_mapped(local) != (family == AF_INET)) {
    errno = EAFNOSUPPORT;
    return -1;
  }
  int fd = bound_socket(family, net::kRoceUdpPort, /*shared=*/true, &local);
  if (fd < 0) return -1;
  sockaddr_storage ss;
  const socklen_t len = socket_address(remote, remote_port, &ss);
  if (connect(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

namespace {

uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (fd < 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  return ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

// The sender's and our addresses, TOS/TTL of a received datagram.
void read_addresses(const msghdr& msg, const sockaddr_storage& from, DatagramInfo* info) {
  if (from.ss_family == AF_INET) {
    auto* sin = reinterpret_cast<const sockaddr_in*>(&from);
    info->src = net::v4_mapped(sin->sin_addr.s_addr);
    info->src_port = ntohs(sin->sin_port);
  } else {
    auto* sin6 = reinterpret_cast<const sockaddr_in6*>(&from);
    info->src = sin6->sin6_addr;
    info->src_port = ntohs(sin6->sin6_port);
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(const_cast<msghdr*>(&msg), c)) {
    int v = 0;
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      in_pktinfo pi;
      std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
      info->dst = net::v4_mapped(pi.ipi_addr.s_addr);
      info->ifindex = static_cast<uint32_t>(pi.ipi_ifindex);
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
      info->traffic_class = *CMSG_DATA(c);
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) {
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      info->hop_limit = static_cast<uint8_t>(v);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
      in6_pktinfo pi;
      std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
      info->dst = pi.ipi6_addr;
      info->ifindex = pi.ipi6_ifindex;
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      info->traffic_class = static_cast<uint8_t>(v);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT) {
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      info->hop_limit = static_cast<uint8_t>(v);
    }
  }
}

}  // namespace

unsigned interface_of(const in6_addr& addr) {
  struct Cached {
    in6_addr addr{};
    unsigned index = 0;
    uint64_t read_ns = 0;
  };
  thread_local Cached last;
  const uint64_t now = coarse_monotonic_ns();
  if (last.read_ns && now - last.read_ns < 1'000'000'000 && std::memcmp(&last.addr, &addr, sizeof addr) == 0)
    return last.index;
  std::optional<PrivateVector<GidEntry>> gids = try_read_gid_table();
  if (!gids) return std::memcmp(&last.addr, &addr, sizeof addr) == 0 ? last.index : 0;  // (unreadable: the last answer)
  unsigned index = 0;
  for (const GidEntry& e : *gids)  // (a GID is the address)
    if (std::memcmp(e.gid.raw, &addr, sizeof addr) == 0) index = e.ifindex;
  last = Cached{addr, index, now};
  return index;
}

namespace {

// This host's addresses, read at most once a second per thread: a peer
// that varies its source address costs a few comparisons, not a read of
// the interfaces each time.
struct LocalAddresses {
  std::vector<in6_addr> addrs;
  uint64_t read_ns = 0;
  in6_addr last{};
  bool last_local = false;
};
thread_local LocalAddresses t_local;

// The rest of is_local_address: a stale snapshot or another address.
[[gnu::noinline]] bool look_up_local_address(LocalAddresses& snap, const in6_addr& a, uint64_t now) {
  std::optional<PrivateVector<GidEntry>> gids;
  if ((!snap.read_ns || now - snap.read_ns >= 1'000'000'000) && (gids = try_read_gid_table())) {
    snap.addrs.clear();  // (unreadable: the addresses read last)
    for (const GidEntry& e : *gids) snap.addrs.push_back(*reinterpret_cast<const in6_addr*>(e.gid.raw));
    snap.read_ns = now;
  } else if (std::memcmp(&snap.last, &a, sizeof a) == 0) {
    return snap.last_local;
  }
  snap.last = a;
  snap.last_local = false;
  for (const in6_addr& x : snap.addrs)
    if (std::memcmp(&x, &a, sizeof a) == 0) snap.last_local = true;
  return snap.last_local;
}

}  // namespace

bool is_local_address(const in6_addr& a) {
  if (net::is_v4_mapped(a) ? a.s6_addr[12] == 127 : IN6_IS_ADDR_LOOPBACK(&a)) return true;
  // The last answer first, while the snapshot is fresh: a sender asks
  // about its peer's address for every packet.
  LocalAddresses& snap = t_local;
  const uint64_t now = coarse_monotonic_ns();
  if (snap.read_ns && now - snap.read_ns < 1'000'000'000 && std::memcmp(&snap.last, &a, sizeof a) == 0)
    return snap.last_local;
  return look_up_local_address(snap, a, now);
}

bool sent_by_this_host(const DatagramInfo& info) {
  static const unsigned loopback = if_nametoindex("lo");
  return (info.ifindex && info.ifindex == loopback) || is_local_address(info.src);
}

uint32_t link_ib_mtu(const in6_addr& dst, const in6_addr& src) {
  const bool v4 = net::is_v4_mapped(dst);
  int fd = kernel_socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 1024;
  // A group address has no route of its own: the link is the one of the
  // address it is sent from (the kernel's choice when it sends).
  if (net::is_multicast(dst)) {
    if (v4) {
      sockaddr_storage from;
      const socklen_t from_len = socket_address(src, 0, &from);
      (void)!bind(fd, reinterpret_cast<sockaddr*>(&from), from_len);
    } else {
      set_int(fd, IPPROTO_IPV6, IPV6_MULTICAST_IF, static_cast<int>(interface_of(src)));
    }
  }
  sockaddr_storage ss;
  const socklen_t len = socket_address(dst, net::kRoceUdpPort, &ss);
  int mtu = 0;
  socklen_t ml = sizeof mtu;
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0 &&
            getsockopt(fd, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_MTU : IPV6_MTU, &mtu, &ml) == 0;
  ::close(fd);
  if (!ok) return 1024;
  return ib_mtu_bytes(ib_mtu_for_link(mtu));
}

std::string udp_port_holder(uint16_t port) {
  char want[8];
  std::snprintf(want, sizeof want, ":%04X", port);
  for (const char* table : {"/proc/net/udp", "/proc/net/udp6"}) {
    FILE* f = std::fopen(table, "r");
    if (!f) continue;
    char line[512];
    while (std::fgets(line, sizeof line, f)) {
      char local[64];
      unsigned uid = 0;
      unsigned long inode = 0;
      if (std::sscanf(line, " %*s %63s %*s %*s %*s %*s %*s %u %*s %lu", local, &uid, &inode) != 3) continue;
      const size_t n = std::strlen(local);
      if (n < 5 || std::strcmp(local + n - 5, want) != 0) continue;
      std::fclose(f);
      return inode == 0 ? std::string("the kernel (the rxe module?)") : "uid " + std::to_string(uid);
    }
    std::fclose(f);
  }
  return "";
}

bool RoceSocket::open_exclusive() {
  fd4_ = bound_socket(AF_INET, net::kRoceUdpPort, /*shared=*/false);
  if (fd4_ < 0) return false;
  fd6_ = bound_socket(AF_INET6, net::kRoceUdpPort, /*shared=*/false);
  if (fd6_ < 0) fd6_ = bound_socket(AF_INET6, 0);  // no IPv6 port: IPv4 still works
  port4_ = local_port(fd4_);
  port6_ = local_port(fd6_);
  owns_port_ = true;
  return true;
}

bool RoceSocket::adopt(int recv4, int recv6) {
  fd4_ = recv4;
  fd6_ = recv6;
  port4_ = fd4_ >= 0 ? local_port(fd4_) : 0;
  port6_ = fd6_ >= 0 ? local_port(fd6_) : 0;
  owns_port_ = false;
  open_send_sockets();
  return send_fd4_ >= 0 || send_fd6_ >= 0;
}

void RoceSocket::replace_receivers(int recv4, int recv6) {
  open_send_sockets();  // (the receiving sockets may have been the sending ones too)
  for (int* fd : {&fd4_, &fd6_})
    if (*fd >= 0) ::close(*fd);
  fd4_ = recv4;
  fd6_ = recv6;
  port4_ = fd4_ >= 0 ? local_port(fd4_) : 0;
  port6_ = fd6_ >= 0 ? local_port(fd6_) : 0;
  owns_port_ = false;
}

void RoceSocket::release_port() { replace_receivers(-1, -1); }

bool RoceSocket::open(bool roce_port) {
  if (!roce_port) {
    fd4_ = bound_socket(AF_INET, 0);
    fd6_ = bound_socket(AF_INET6, 0);
    port4_ = local_port(fd4_);
    port6_ = local_port(fd6_);
    return fd4_ >= 0 || fd6_ >= 0;
  }
  fd4_ = bound_socket(AF_INET, net::kRoceUdpPort);
  owns_port_ = fd4_ >= 0;
  if (fd4_ < 0) {
    // Our own processes share the port (SO_REUSEPORT): whoever holds it is
    // not one of them, and gets the RoCE packets sent to this host.
    const std::string holder = udp_port_holder(net::kRoceUdpPort);
    SV_ERROR("UDP port %u in this network namespace is held by %s, not by softverbs processes of uid %u: "
             "RoCEv2 packets to this host go to it, so connections from other hosts to us will fail "
             "(retry exceeded). Free the port; until then we send from an ephemeral port and try again every second",
             net::kRoceUdpPort, holder.empty() ? "another program" : holder.c_str(), geteuid());
    fd4_ = bound_socket(AF_INET, 0);
  }
  fd6_ = bound_socket(AF_INET6, owns_port_ ? net::kRoceUdpPort : 0);
  if (fd6_ < 0 && owns_port_) fd6_ = bound_socket(AF_INET6, 0);  // no IPv6 port: IPv4 still works
  port4_ = local_port(fd4_);
  port6_ = local_port(fd6_);
  if (owns_port_) open_send_sockets();
  return fd4_ >= 0 || fd6_ >= 0;
}

void RoceSocket::open_send_sockets() {
  // Our packets leave from a port of this process's own, as a NIC's leave
  // from a port of the QP's: RoCEv2 answers go to 4791 whatever the source
  // port, and a peer's process can then tell our flow from those of our
  // host's other processes and have it brought straight to itself
  // (roce_steering.h). From 4791, every flow between two hosts would be
  // one, given by the kernel to a single process that forwards the rest.
  if (send_fd4_ < 0) send_fd4_ = bound_socket(AF_INET, 0);
  if (send_fd6_ < 0) send_fd6_ = bound_socket(AF_INET6, 0);
  send_port4_ = send_fd4_ >= 0 ? local_port(send_fd4_) : port4_;
  send_port6_ = send_fd6_ >= 0 ? local_port(send_fd6_) : port6_;
}

bool RoceSocket::try_own() {
  if (owns_port_) return true;
  int f4 = bound_socket(AF_INET, net::kRoceUdpPort);
  if (f4 < 0) return false;
  int f6 = bound_socket(AF_INET6, net::kRoceUdpPort);
  if (f6 < 0) f6 = bound_socket(AF_INET6, 0);
  if (fd4_ >= 0) ::close(fd4_);
  if (fd6_ >= 0) ::close(fd6_);
  fd4_ = f4;
  fd6_ = f6;
  port4_ = local_port(fd4_);
  port6_ = local_port(fd6_);
  owns_port_ = true;
  open_send_sockets();
  SV_INFO("this process now owns UDP port %u in its network namespace", net::kRoceUdpPort);
  return true;
}

void RoceSocket::leave_group() {
  sockaddr_storage discard;
  if (fd4_ >= 0) {
    const socklen_t len = socket_address(net::v4_mapped(htonl(INADDR_LOOPBACK)), 9, &discard);
    connect(fd4_, reinterpret_cast<sockaddr*>(&discard), len);
  }
  if (fd6_ >= 0) {
    const socklen_t len = socket_address(in6addr_loopback, 9, &discard);
    connect(fd6_, reinterpret_cast<sockaddr*>(&discard), len);
  }
}

void RoceSocket::close() {
  for (int* fd : {&fd4_, &fd6_, &send_fd4_, &send_fd6_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
  for (auto& family : lanes_)
    for (Lane& l : family) {
      if (const int fd = l.fd.exchange(-1); fd >= 0) ::close(fd);
      l.port = 0;
    }
  owns_port_ = false;
}

uint16_t RoceSocket::lane_port(const in6_addr& dst, uint8_t lane) {
  const int f = net::is_v4_mapped(dst) ? 0 : 1;
  Lane& l = lanes_[f][lane];
  int fd = lane ? l.fd.load(std::memory_order_acquire) : -2;
  if (fd == -1) {
    std::lock_guard g(lanes_mu_);
    fd = l.fd.load(std::memory_order_relaxed);
    if (fd == -1) {
      fd = bound_socket(f == 0 ? AF_INET : AF_INET6, 0);
      // (Nothing is read from it: what a stranger sends to its port may
      // hold no more than the kernel's smallest receive buffer.)
      if (fd >= 0) set_int(fd, SOL_SOCKET, SO_RCVBUF, 0);
      if (fd >= 0) l.port = local_port(fd);
      else SV_DEBUG("no UDP socket for the RoCEv2 lane to slot %u: %s", lane, strerror(errno));
      l.fd.store(fd >= 0 ? fd : -2, std::memory_order_release);
    }
  }
  return fd >= 0 ? l.port : source_port(dst);
}

uint16_t RoceSocket::source_port(const in6_addr& dst) const {
  const bool v4 = net::is_v4_mapped(dst);
  if (v4 ? send_fd4_ >= 0 : send_fd6_ >= 0) return v4 ? send_port4_ : send_port6_;
  return v4 ? port4_ : port6_;
}

uint16_t RoceSocket::receive_port(bool v4) const { return v4 ? port4_ : port6_; }

namespace {

// The control messages of one send: the source address (the QP's source
// GID) and the traffic class.
struct SendControl {
  alignas(cmsghdr) uint8_t bytes[CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(int)) +
                                 CMSG_SPACE(sizeof(uint16_t))];
};

// Appends UDP_SEGMENT (the GSO segment size) to a prepared message.
void add_segment_size(msghdr* msg, uint16_t size) {
  auto* c = reinterpret_cast<cmsghdr*>(static_cast<uint8_t*>(msg->msg_control) + msg->msg_controllen);
  c->cmsg_level = SOL_UDP;
  c->cmsg_type = UDP_SEGMENT;
  c->cmsg_len = CMSG_LEN(sizeof size);
  std::memcpy(CMSG_DATA(c), &size, sizeof size);
  msg->msg_controllen += CMSG_SPACE(sizeof size);
}

// (One GSO send reaches the other host as one buffer, which its kernel
// hands whole to the socket its steering picks by the first datagram's
// DestQP (tools/hostd/kernel_steering.h): so a run never mixes datagrams
// for two processes there, by the slot DestQP carries.)
bool same_flow(const OutDatagram& a, const OutDatagram& b) {
  return std::memcmp(&a.src, &b.src, sizeof a.src) == 0 && std::memcmp(&a.dst, &b.dst, sizeof a.dst) == 0 &&
         a.dst_port == b.dst_port && a.traffic_class == b.traffic_class && a.lane == b.lane &&
         a.len > hostd::kDestQpSlotByte && b.len > hostd::kDestQpSlotByte &&
         a.data[hostd::kDestQpSlotByte] == b.data[hostd::kDestQpSlotByte];
}

// Linux cuts a GSO send into at most 64 segments (UDP_MAX_SEGMENTS) of one
// IP packet's worth each.
constexpr size_t kMaxSegments = 64;
constexpr size_t kMaxGsoBytes = 65535 - 40 - 8;

// How many datagrams from d[0] make one GSO send: one flow, all of d[0]'s
// size but the last (which may be shorter).
size_t gso_run(const OutDatagram* d, size_t count) {
  size_t n = 1, bytes = d[0].len;
  while (n < count && n < kMaxSegments && same_flow(d[0], d[n]) && d[n].len <= d[0].len &&
         bytes + d[n].len <= kMaxGsoBytes) {
    bytes += d[n].len;
    if (d[n++].len < d[0].len) break;
  }
  return n;
}

// The k-th segment of a GSO send leaves with IPv4 ID k (the kernel numbers
// them from the first's 0): each ICRC must cover that ID. Toggles (apply
// again to undo).
void number_segments(OutDatagram* d, size_t n) {
  if (!net::is_v4_mapped(d[0].dst)) return;  // IPv6 has no ID
  for (size_t k = 1; k < n; ++k) net::set_icrc_ip_id(d[k].data, d[k].len, static_cast<uint16_t>(k));
}

// Fills `msg` (and its address, iovec and control storage) to send `d`;
// returns the socket family's index (0: IPv4, 1: IPv6).
int prepare(const OutDatagram& d, msghdr* msg, sockaddr_storage* to, iovec* iov, SendControl* control) {
  *iov = iovec{const_cast<uint8_t*>(d.data), d.len};
  *msg = msghdr{};
  *control = SendControl{};
  msg->msg_iov = iov;
  msg->msg_iovlen = 1;
  msg->msg_control = control->bytes;
  msg->msg_controllen = sizeof control->bytes;
  msg->msg_name = to;
  msg->msg_namelen = socket_address(d.dst, d.dst_port, to);
  cmsghdr* c = CMSG_FIRSTHDR(msg);
  const int tclass = d.traffic_class;
  if (net::is_v4_mapped(d.dst)) {
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_PKTINFO;
    c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
    in_pktinfo pi{};
    std::memcpy(&pi.ipi_spec_dst, d.src.s6_addr + 12, 4);
    std::memcpy(CMSG_DATA(c), &pi, sizeof pi);
    c = CMSG_NXTHDR(msg, c);
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_TOS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &tclass, sizeof tclass);
    msg->msg_controllen = CMSG_SPACE(sizeof(in_pktinfo)) + CMSG_SPACE(sizeof(int));
    return 0;
  }
  c->cmsg_level = IPPROTO_IPV6;
  c->cmsg_type = IPV6_PKTINFO;
  c->cmsg_len = CMSG_LEN(sizeof(in6_pktinfo));
  in6_pktinfo pi{};
  pi.ipi6_addr = d.src;
  // An IPv6 group is on every link: the one of the source address (IPv4
  // finds it from the source address itself).
  if (net::is_multicast(d.dst)) pi.ipi6_ifindex = interface_of(d.src);
  std::memcpy(CMSG_DATA(c), &pi, sizeof pi);
  c = CMSG_NXTHDR(msg, c);
  c->cmsg_level = IPPROTO_IPV6;
  c->cmsg_type = IPV6_TCLASS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &tclass, sizeof tclass);
  msg->msg_controllen = CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(int));
  return 1;
}

}  // namespace

bool RoceSocket::send(const in6_addr& src, const in6_addr& dst, uint16_t dst_port, uint8_t traffic_class,
                      const uint8_t* data, size_t len) {
  OutDatagram d{src, dst, dst_port, traffic_class, const_cast<uint8_t*>(data), len};  // (only read here)
  msghdr msg;
  sockaddr_storage to;
  iovec iov;
  SendControl control;
  const int fd = sending_fd(prepare(d, &msg, &to, &iov, &control));
  if (fd < 0) {
    errno = EAFNOSUPPORT;
    return false;
  }
  for (;;) {
    if (sendmsg(fd, &msg, 0) == static_cast<ssize_t>(len)) return true;
    if (errno == EINTR) continue;
    return false;
  }
}

void RoceSocket::send_many(OutDatagram* d, size_t count) {
  constexpr size_t kMax = 64;
  mmsghdr msgs[kMax];
  sockaddr_storage to[kMax];
  iovec iov[kMax];  // one per datagram; a GSO send takes a run of them
  SendControl control[kMax];
  size_t runs[kMax], starts[kMax];
  size_t i = 0;
  while (i < count) {
    // Messages of one family and lane (one socket) go in one sendmmsg();
    // each is a GSO run.
    size_t m = 0, first = i;
    int family = -1;
    const uint8_t lane = d[i].lane;
    while (i < count && m < kMax && i - first < kMax) {
      msghdr probe;
      const int f = prepare(d[i], &probe, &to[m], &iov[i - first], &control[m]);
      if ((family >= 0 && f != family) || d[i].lane != lane) break;
      family = f;
      size_t n = gso_ && knobs().udp_offload ? gso_run(d + i, std::min(count - i, kMax - (i - first))) : 1;
      for (size_t k = 1; k < n; ++k) iov[i - first + k] = iovec{d[i + k].data, d[i + k].len};
      probe.msg_iov = &iov[i - first];
      probe.msg_iovlen = n;
      probe.msg_name = &to[m];
      probe.msg_control = control[m].bytes;
      if (n > 1) {
        add_segment_size(&probe, static_cast<uint16_t>(d[i].len));
        number_segments(d + i, n);
      }
      msgs[m].msg_hdr = probe;
      starts[m] = i;
      runs[m++] = n;
      i += n;
    }
    const int fd = sending_fd(family, lane);
    size_t done = 0, at = first;
    while (fd >= 0 && done < m) {
      int sent = sendmmsg(fd, msgs + done, static_cast<unsigned>(m - done), 0);
      if (sent > 0) {
        for (int k = 0; k < sent; ++k) at += runs[done + k];
        done += static_cast<size_t>(sent);
      } else if (sent < 0 && errno == EINTR) {
        continue;
      } else if (runs[done] > 1 && (errno == EINVAL || errno == EIO || errno == ENOPROTOOPT)) {
        // No GSO for this socket or route: these, and the rest, one by one.
        SV_INFO("UDP GSO refused (%s): RoCEv2 packets go one by one", strerror(errno));
        gso_ = false;
        for (size_t k = done; k < m; ++k)
          if (runs[k] > 1) number_segments(d + starts[k], runs[k]);  // back to the ICRCs of ID 0
        i = at;
        break;
      } else {
        at += runs[done];
        ++done;  // the kernel refused this one (no route, buffer full): lost on the wire
      }
    }
  }
}

ssize_t RoceSocket::receive(int fd, uint8_t* buf, size_t cap, DatagramInfo* info) {
  sockaddr_storage from{};
  iovec iov{buf, cap};
  msghdr msg{};
  msg.msg_name = &from;
  msg.msg_namelen = sizeof from;
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) uint8_t control[256];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n = recvmsg(fd, &msg, MSG_DONTWAIT);
  if (n < 0) return -1;
  if (msg.msg_flags & MSG_TRUNC) {  // larger than any RoCE packet: not ours
    errno = EMSGSIZE;
    return -1;
  }
  read_addresses(msg, from, info);
  return n;
}

int RoceSocket::receive_many(int fd, uint8_t* const* bufs, size_t cap, int count, ssize_t* lens, uint16_t* segs,
                             DatagramInfo* infos) {
  constexpr int kMax = 32;
  if (count > kMax) count = kMax;
  mmsghdr msgs[kMax];
  sockaddr_storage from[kMax];
  iovec iov[kMax];
  alignas(cmsghdr) uint8_t control[kMax][256];
  for (int i = 0; i < count; ++i) {
    iov[i] = iovec{bufs[i], cap};
    msgs[i].msg_hdr = msghdr{};
    msgs[i].msg_hdr.msg_name = &from[i];
    msgs[i].msg_hdr.msg_namelen = sizeof from[i];
    msgs[i].msg_hdr.msg_iov = &iov[i];
    msgs[i].msg_hdr.msg_iovlen = 1;
    msgs[i].msg_hdr.msg_control = control[i];
    msgs[i].msg_hdr.msg_controllen = sizeof control[i];
  }
  int got = recvmmsg(fd, msgs, static_cast<unsigned>(count), MSG_DONTWAIT, nullptr);
  if (got <= 0) return 0;
  for (int i = 0; i < got; ++i) {
    lens[i] = (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) ? -1 : static_cast<ssize_t>(msgs[i].msg_len);
    read_addresses(msgs[i].msg_hdr, from[i], &infos[i]);
    segs[i] = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msgs[i].msg_hdr); c; c = CMSG_NXTHDR(&msgs[i].msg_hdr, c))
      if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
        int size;
        std::memcpy(&size, CMSG_DATA(c), sizeof size);
        segs[i] = static_cast<uint16_t>(size);
      }
  }
  return got;
}

}  // namespace sv
