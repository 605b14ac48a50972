// Several processes of one network namespace sharing UDP port 4791. They
// all bind it with SO_REUSEPORT, and the kernel hands each flow (by a hash of
// its addresses and ports) to one of them; without root it cannot steer by
// QPN (that would take an eBPF program). So the process that receives a
// packet for a QP of another process (the QPN's registry slot names the
// process) hands it to that process's forwarding socket, a unix datagram
// socket: roce-<netns>-<slot> in the user's runtime directory (no other
// user can bind it first or send to it), or for a named, shared domain the
// abstract "softverbs-<domain>-roce-<slot>", which, like the port, belongs
// to the network namespace. When a process exits, its flows move to
// another at once. Should the port be held by something that does not
// share it, a process sends from an ephemeral port and tries to bind 4791
// again every second (RoceSocket::try_own).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "transport/roce_socket.h"

namespace sv {

class Forwarder {
 public:
  Forwarder() = default;
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;
  ~Forwarder() { close(); }

  // Binds this process's forwarding socket (registry slot `slot`).
  bool open(uint32_t slot);
  // Closes the sockets; the name stays (a fork()ed child closes its
  // parent's copy, which the parent still uses).
  void close();
  // Removes the socket's name from the runtime directory (at exit).
  void remove_name();
  int fd() const { return fd_; }

  // Hands a datagram that arrived on port `dst_port` to the process of
  // registry slot `slot`; false when that process is gone. `seg` nonzero:
  // `data` is a GRO buffer, datagrams of `seg` bytes back to back (the
  // last may be shorter), all for that process: one message for them all,
  // so a burst does not overrun the unix queue's few slots.
  bool forward(uint32_t slot, const DatagramInfo& info, uint16_t dst_port, const uint8_t* data, size_t len,
               uint16_t seg = 0);
  // Receives one forwarded message without blocking (into `buf`, `cap`
  // bytes): its length, or -1 when none waits; `*seg` as forward() had it.
  // Messages another user sent (the kernel's credentials say so) are
  // dropped and counted.
  ssize_t receive(uint8_t* buf, size_t cap, DatagramInfo* info, uint16_t* dst_port, uint16_t* seg);
  // How many messages of other users receive() has dropped; taken (reset).
  uint64_t take_foreign() { return std::exchange(foreign_, 0); }

 private:
  sockaddr_un address_of(uint32_t slot, socklen_t* len) const;

  // After a send that waited in vain, how long sends do not wait.
  static constexpr uint64_t kCongestedNs = 2'000'000;

  int fd_ = -1;       // ours, bound: what others forward to us
  int send_fd_ = -1;  // unbound, blocking with a short timeout: what we forward
  uint64_t foreign_ = 0;
  uint64_t congested_until_ns_ = 0;  // monotonic_ns(): sends do not wait for room before this
  std::string bound_path_;  // a filesystem name we bound (empty: abstract)
  std::string dir_;              // the runtime directory; empty: abstract names (a named domain)
  std::string file_prefix_;      // roce-<netns>- : a slot's file in dir_
  std::string abstract_prefix_;  // softverbs-<domain>-roce- : a slot's abstract name
};

}  // namespace sv
