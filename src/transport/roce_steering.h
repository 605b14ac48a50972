// Flows of RoCEv2 packets the kernel brings straight to this process.
//
// Our processes share UDP port 4791 (roce_forward.h): the kernel gives each
// flow (source and destination address and port) to one of them by a hash,
// and a packet for another process's QP is forwarded to it through a unix
// socket: a second trip through the kernel, and a wait for the forwarding
// process to be scheduled, which with several busy processes per host cost
// most of their bandwidth. A process that is forwarded a flow's packets
// for its own QPs opens a UDP socket on 4791 connected to the flow's
// source: the kernel prefers a connected socket to the shared ones for the
// packets it matches, so the flow comes here from then on, without root
// (steering by QPN would take an eBPF program). A peer's processes each
// send from a port of their own (RoceSocket::source_port), so the flows of
// two processes are two flows; a flow that carries packets for several of
// our processes (one peer process talking to several) goes to the one that
// connected first, and the others are still forwarded theirs.
//
// At most kMax flows per process; the sockets stay until the process exits
// (a fork()ed child closes its copies). Calls that change the set come
// from the thread draining the sockets (it holds the NIC's rx_mu); fd() and
// count() may be read by the network thread at any time.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "transport/roce_socket.h"

namespace sv::roce {

class SteeredFlows {
 public:
  static constexpr size_t kMax = 32;

  SteeredFlows() = default;
  SteeredFlows(const SteeredFlows&) = delete;
  SteeredFlows& operator=(const SteeredFlows&) = delete;
  ~SteeredFlows() { close(); }

  // Opens a socket for the flow `info` arrived in (its source address and
  // port, our destination address), unless one is open or was tried: true
  // if it opened one now. Refused for good once the port cannot be shared
  // with us (the host service holds it) or kMax flows are open.
  bool steer(const DatagramInfo& info);
  size_t count() const { return count_.load(std::memory_order_acquire); }
  int fd(size_t i) const { return fds_[i].load(std::memory_order_relaxed); }
  // Closes every socket (at exit, after their packets were read; in a
  // fork()ed child, whose parent keeps its own).
  void close();

 private:
  struct Flow {
    in6_addr local{}, remote{};
    uint16_t remote_port = 0;
  };
  bool known(const DatagramInfo& info) const;

  Flow flows_[kMax];
  std::atomic<int> fds_[kMax] = {};
  std::atomic<size_t> count_{0};
  bool refused_ = false;
};

}  // namespace sv::roce
