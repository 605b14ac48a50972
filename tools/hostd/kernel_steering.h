// The kernel steers each RoCEv2 datagram that reaches the host straight to
// the socket of the process whose QP it is for, as a NIC's flow steering
// delivers to a queue: the service's UDP 4791 socket and one socket per
// process form a reuseport group (created by the service, so no other user
// can join it: the kernel keeps a group to one uid), and a BPF program the
// service attaches picks the member by the slot that BTH DestQP carries
// (hostd/datagram_route.h). The service then stays out of the data path:
// it sees only what no process's slot takes (CM MADs to QP1, datagrams for
// slots nobody leased). Needs CAP_BPF (root); without it the service
// forwards every datagram itself, as before.
#pragma once

#include <cstdint>

namespace sv::hostd {

class KernelSteering {
 public:
  KernelSteering() = default;
  KernelSteering(const KernelSteering&) = delete;
  KernelSteering& operator=(const KernelSteering&) = delete;
  ~KernelSteering();

  // Loads the program and its map, and attaches it to the reuseport group
  // of `service_fd` (a UDP socket bound to 4791 with SO_REUSEPORT), whose
  // slot-0 member it becomes: what no process takes goes to it. False
  // (errno) when the kernel refuses (no CAP_BPF, no BPF in this kernel).
  bool attach(int service_fd);
  bool attached() const { return prog_ >= 0; }
  // Lets the program and map go (the group keeps a program it has).
  void reset();
  // Datagrams for `slot` go to `member_fd`, a socket of the group
  // (steered_member_socket). False (errno) when the kernel refuses.
  bool steer(uint32_t slot, int member_fd);
  // No longer (the kernel also forgets a member socket once it closes).
  void unsteer(uint32_t slot);

 private:
  int map_ = -1;
  int prog_ = -1;
};

// A new member of the service's reuseport group on UDP 4791 (`family`
// AF_INET or AF_INET6), set up as a process's receiving RoCE socket; -1
// (errno) on failure. Created by the service, owned by its uid: only it can
// add members to the group.
int steered_member_socket(int family);

}  // namespace sv::hostd
