#include "cm_group_membership.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/kernel_socket.h"

namespace sv::rdmacm {
namespace {

bool same_ip(const sockaddr* a, const sockaddr* b) {
  if (a->sa_family != b->sa_family) return false;
  if (a->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(b)->sin_addr.s_addr;
  return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(a)->sin6_addr,
                     &reinterpret_cast<const sockaddr_in6*>(b)->sin6_addr, sizeof(in6_addr)) == 0;
}

// The interface that has address `local`: its index and flags; false when none has.
bool interface_with(const sockaddr* local, unsigned* index, unsigned* flags) {
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return false;
  bool found = false;
  for (ifaddrs* ifa = list; ifa && !found; ifa = ifa->ifa_next) {
    if (!ifa->ifa_addr || !same_ip(ifa->ifa_addr, local)) continue;
    *index = if_nametoindex(ifa->ifa_name);
    *flags = ifa->ifa_flags;
    found = *index != 0;
  }
  freeifaddrs(list);
  return found;
}

}  // namespace

GroupMembership& GroupMembership::operator=(GroupMembership&& other) noexcept {
  if (this != &other) {
    leave();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

int GroupMembership::join(const sockaddr* group, const sockaddr* local) {
  leave();
  unsigned index = 0, flags = 0;
  if (group->sa_family != AF_INET && group->sa_family != AF_INET6) return 0;  // (AF_IB: no IP group)
  if (group->sa_family != local->sa_family || !interface_with(local, &index, &flags)) return EADDRNOTAVAIL;
  if ((flags & IFF_LOOPBACK) || !(flags & IFF_MULTICAST)) return 0;
  int fd = sv::kernel_socket(group->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  int rc;
  if (group->sa_family == AF_INET) {
    ip_mreqn req{};
    req.imr_multiaddr = reinterpret_cast<const sockaddr_in*>(group)->sin_addr;
    req.imr_ifindex = static_cast<int>(index);
    rc = setsockopt(fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &req, sizeof req);
  } else {
    ipv6_mreq req{};
    req.ipv6mr_multiaddr = reinterpret_cast<const sockaddr_in6*>(group)->sin6_addr;
    req.ipv6mr_interface = index;
    rc = setsockopt(fd, IPPROTO_IPV6, IPV6_JOIN_GROUP, &req, sizeof req);
  }
  if (rc != 0) {
    int e = errno;
    close(fd);
    return e;
  }
  fd_ = fd;
  return 0;
}

void GroupMembership::leave() {
  if (fd_ >= 0) close(fd_);  // the kernel leaves the group with the socket
  fd_ = -1;
}

}  // namespace sv::rdmacm
