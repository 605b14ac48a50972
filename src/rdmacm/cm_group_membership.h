// The host's membership of an IP multicast group, held while an rdma_cm_id
// is joined to it. A UD QP attached to a group receives what other hosts
// send to the group only if the kernel accepts the group's datagrams on the
// link: as the kernel's rdma_cm does for RoCEv2 (an IGMP/MLD join on the
// id's interface), rdma_join_multicast joins the group on the interface of
// the id's source address, with a socket kept for it. softverbs' RoCEv2
// sockets then receive the group's packets (IP_MULTICAST_ALL). Nothing is
// joined for a loopback address: the group stays on this host, in shared
// memory.
#pragma once

#include <sys/socket.h>

namespace sv::rdmacm {

class GroupMembership {
 public:
  GroupMembership() = default;
  GroupMembership(GroupMembership&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  GroupMembership& operator=(GroupMembership&& other) noexcept;
  GroupMembership(const GroupMembership&) = delete;
  GroupMembership& operator=(const GroupMembership&) = delete;
  ~GroupMembership() { leave(); }

  // Joins `group` on the interface that has address `local`. 0, or an
  // errno: EADDRNOTAVAIL when no interface has `local` (or it is of
  // another family). A loopback or non-multicast interface, or a group
  // that is not IP, joins nothing and succeeds.
  int join(const sockaddr* group, const sockaddr* local);
  void leave();

 private:
  int fd_ = -1;
};

}  // namespace sv::rdmacm
