#include "transport/roce_socket.h"

#include <netinet/ip.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "net/roce_frame.h"
#include "net/udp_sport.h"
#include "util/log.h"

namespace sv {
namespace {

// Room for the largest RoCE datagram in the socket buffers: a burst of a
// send window (transport/roce_sender.h) must not overflow them.
constexpr int kSocketBufferBytes = 4 << 20;

void set_int(int fd, int level, int name, int value) { setsockopt(fd, level, name, &value, sizeof value); }

// A UDP socket of `family` bound to `port` (0: any); -1 on failure.
int bound_socket(int family, uint16_t port) {
  int fd = socket(family, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  sockaddr_storage ss{};
  socklen_t len;
  if (family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    len = sizeof *sin;
  } else {
    set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1);
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(port);
    len = sizeof *sin6;
  }
  if (bind(fd, reinterpret_cast<sockaddr*>(&ss), len) != 0) {
    int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  set_int(fd, SOL_SOCKET, SO_RCVBUF, kSocketBufferBytes);
  set_int(fd, SOL_SOCKET, SO_SNDBUF, kSocketBufferBytes);
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

uint16_t local_port(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (fd < 0 || getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return 0;
  return ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                       : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
}

}  // namespace

uint32_t link_ib_mtu(const in6_addr& dst) {
  constexpr int kRxeMaxHeaders = 80;  // rxe's RXE_MAX_HDR_LENGTH: IP, UDP, BTH and the largest extensions
  const bool v4 = net::is_v4_mapped(dst);
  int fd = socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return 1024;
  sockaddr_storage ss{};
  socklen_t len;
  if (v4) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&ss);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(net::kRoceUdpPort);
    std::memcpy(&sin->sin_addr, dst.s6_addr + 12, 4);
    len = sizeof *sin;
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&ss);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(net::kRoceUdpPort);
    sin6->sin6_addr = dst;
    len = sizeof *sin6;
  }
  int mtu = 0;
  socklen_t ml = sizeof mtu;
  bool ok = connect(fd, reinterpret_cast<sockaddr*>(&ss), len) == 0 &&
            getsockopt(fd, v4 ? IPPROTO_IP : IPPROTO_IPV6, v4 ? IP_MTU : IPV6_MTU, &mtu, &ml) == 0;
  ::close(fd);
  if (!ok) return 1024;
  uint32_t ib = 4096;
  while (ib > 256 && static_cast<int>(ib) + kRxeMaxHeaders > mtu) ib /= 2;
  return ib;
}

bool RoceSocket::open() {
  fd4_ = bound_socket(AF_INET, net::kRoceUdpPort);
  owns_port_ = fd4_ >= 0;
  if (fd4_ < 0) {
    SV_INFO("UDP port %u is taken in this network namespace: this process sends RoCEv2 but cannot receive it",
            net::kRoceUdpPort);
    fd4_ = bound_socket(AF_INET, 0);
  }
  fd6_ = bound_socket(AF_INET6, owns_port_ ? net::kRoceUdpPort : 0);
  if (fd6_ < 0 && owns_port_) fd6_ = bound_socket(AF_INET6, 0);  // no IPv6 port: IPv4 still works
  port4_ = local_port(fd4_);
  port6_ = local_port(fd6_);
  return fd4_ >= 0 || fd6_ >= 0;
}

void RoceSocket::close() {
  if (fd4_ >= 0) ::close(fd4_);
  if (fd6_ >= 0) ::close(fd6_);
  fd4_ = fd6_ = -1;
  owns_port_ = false;
}

uint16_t RoceSocket::source_port(const in6_addr& dst) const { return net::is_v4_mapped(dst) ? port4_ : port6_; }

bool RoceSocket::send(const in6_addr& src, const in6_addr& dst, uint16_t dst_port, uint8_t traffic_class,
                      const uint8_t* data, size_t len) {
  iovec iov{const_cast<uint8_t*>(data), len};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) uint8_t control[CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  sockaddr_storage to{};
  int fd;
  const int tclass = traffic_class;
  if (net::is_v4_mapped(dst)) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&to);
    sin->sin_family = AF_INET;
    sin->sin_port = htons(dst_port);
    std::memcpy(&sin->sin_addr, dst.s6_addr + 12, 4);
    msg.msg_namelen = sizeof *sin;
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_PKTINFO;
    c->cmsg_len = CMSG_LEN(sizeof(in_pktinfo));
    in_pktinfo pi{};
    std::memcpy(&pi.ipi_spec_dst, src.s6_addr + 12, 4);
    std::memcpy(CMSG_DATA(c), &pi, sizeof pi);
    c = CMSG_NXTHDR(&msg, c);
    c->cmsg_level = IPPROTO_IP;
    c->cmsg_type = IP_TOS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &tclass, sizeof tclass);
    msg.msg_controllen = CMSG_SPACE(sizeof(in_pktinfo)) + CMSG_SPACE(sizeof(int));
    fd = fd4_;
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&to);
    sin6->sin6_family = AF_INET6;
    sin6->sin6_port = htons(dst_port);
    sin6->sin6_addr = dst;
    msg.msg_namelen = sizeof *sin6;
    c->cmsg_level = IPPROTO_IPV6;
    c->cmsg_type = IPV6_PKTINFO;
    c->cmsg_len = CMSG_LEN(sizeof(in6_pktinfo));
    in6_pktinfo pi{};
    pi.ipi6_addr = src;
    std::memcpy(CMSG_DATA(c), &pi, sizeof pi);
    c = CMSG_NXTHDR(&msg, c);
    c->cmsg_level = IPPROTO_IPV6;
    c->cmsg_type = IPV6_TCLASS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &tclass, sizeof tclass);
    msg.msg_controllen = CMSG_SPACE(sizeof(in6_pktinfo)) + CMSG_SPACE(sizeof(int));
    fd = fd6_;
  }
  msg.msg_name = &to;
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
  if (from.ss_family == AF_INET) {
    auto* sin = reinterpret_cast<sockaddr_in*>(&from);
    info->src = net::v4_mapped(sin->sin_addr.s_addr);
    info->src_port = ntohs(sin->sin_port);
  } else {
    auto* sin6 = reinterpret_cast<sockaddr_in6*>(&from);
    info->src = sin6->sin6_addr;
    info->src_port = ntohs(sin6->sin6_port);
  }
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    int v = 0;
    if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_PKTINFO) {
      in_pktinfo pi;
      std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
      info->dst = net::v4_mapped(pi.ipi_addr.s_addr);
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TOS) {
      info->traffic_class = *CMSG_DATA(c);
    } else if (c->cmsg_level == IPPROTO_IP && c->cmsg_type == IP_TTL) {
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      info->hop_limit = static_cast<uint8_t>(v);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_PKTINFO) {
      in6_pktinfo pi;
      std::memcpy(&pi, CMSG_DATA(c), sizeof pi);
      info->dst = pi.ipi6_addr;
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_TCLASS) {
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      info->traffic_class = static_cast<uint8_t>(v);
    } else if (c->cmsg_level == IPPROTO_IPV6 && c->cmsg_type == IPV6_HOPLIMIT) {
      std::memcpy(&v, CMSG_DATA(c), sizeof v);
      info->hop_limit = static_cast<uint8_t>(v);
    }
  }
  return n;
}

}  // namespace sv
