// The optional host service, softverbs-hostd (tools/hostd): one per network
// namespace, run by root or a dedicated user. It owns UDP port 4791 and
// leases registry slots host-wide, so that users of one host can talk RDMA
// to each other and a QPN names one QP on the host (docs/ARCHITECTURE.md,
// "Security"). A process connects to its abstract SOCK_SEQPACKET socket when
// it joins the host; the lease of its slot, and the RoCEv2 datagrams for
// its QPs, travel over that one connection and die with it. Without the
// service nothing changes: the socket is simply not there.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>

#include "util/host_service_socket.h"
#include "util/port_attestation.h"
#include "util/private_heap.h"

namespace sv::shm {

namespace hostd = sv::hostd;

// This process's connection to the host service.
class HostService : public PrivateHeapObject {
 public:
  // Connects to the service of this network namespace
  // (util/host_service_socket.h). nullptr when none runs, when
  // SOFTVERBS_HOSTD=off, or when the socket's owner is not a uid we trust
  // with our packets (root, our own, SOFTVERBS_HOSTD_UID): then a warning
  // names it. nullptr with *unreachable set when one runs but did not take
  // the connection in time (said as an error).
  static std::unique_ptr<HostService> connect(bool* unreachable);
  // One not connected yet: for a process that held the port itself until
  // a service came (rejoin then connects it).
  static std::unique_ptr<HostService> unconnected() {
    return std::unique_ptr<HostService>(new HostService(-1, host_service_uid()));
  }
  ~HostService();
  HostService(const HostService&) = delete;
  HostService& operator=(const HostService&) = delete;

  // *holder of a lease the service refused with the whole connection
  // (hostd::Refusal, said as an error).
  static constexpr uint32_t kRefusedByService = UINT32_MAX - 2;

  // Asks for registry slot `slot`: true when it is ours on the whole host.
  // False when another process holds it (its uid in *holder), when the
  // service does not answer (then *holder = UINT32_MAX), or when it
  // refused our connection (kRefusedByService).
  bool lease(uint32_t slot, uint32_t* holder);
  // Receives one datagram the service forwarded, without blocking: its
  // length (its header in *h), or -1 when none waits (errno EAGAIN) or the
  // service is gone (errno EPIPE: it closed the connection). Channel
  // messages met on the way are kept for take_channel_events.
  ssize_t receive(uint8_t* buf, size_t cap, hostd::DatagramHeader* h);

  // A ring pair to another user's process of this host, or its end
  // (hostd::ChannelOpen): received by receive(), for the transport. The
  // descriptors are the taker's: ring out, ring in, the bell to ring, the
  // bell to watch.
  struct ChannelEvent {
    bool open = false;
    uint32_t peer_slot = 0;
    pid_t peer_pid = 0;
    int fds[4] = {-1, -1, -1, -1};
    int count = 0;
  };
  // (Called by the thread that called receive(), which holds the lock
  // around both.)
  PrivateVector<ChannelEvent> take_channel_events() { return std::exchange(channel_events_, {}); }
  // Asks the service for rings to the process of `peer_slot` (another
  // user's, on this host); they come, or not, later (ChannelEvent).
  bool request_channel(uint32_t peer_slot);
  // Hands the service a datagram for a QP of this host (`h` says where
  // from and to): local processes reach each other only this way. False
  // when it could not take it now (a lost packet, to RoCE).
  bool send(const hostd::DatagramHeader& h, const uint8_t* data, size_t len);
  // Tells the service our network thread runs: CM MADs (QP1) and
  // multicast datagrams for our user may come to us from now on.
  void network_up();
  // Connects anew and asks for `slot` with the sockets we have
  // (hostd::Rejoin): our members of the port's groups (-1: none; then the
  // service may give us new ones, take_steered_socket) and those we send
  // from, which it vouches for again. For a service that restarted, or one
  // that came while we held the port. True when it took us; false when
  // none answers (try again later) or it refused (*refused set, said as an
  // error: another process has the slot now).
  bool rejoin(uint32_t slot, int member4, int member6, int send4, int send6, bool* refused);
  // Hands the service the sockets we send RoCEv2 from (-1: none of that
  // family), to hold and vouch for (hostd::Attest). False when it refused
  // or did not answer: our datagrams to local processes are then dropped
  // by their receivers.
  bool attest(int send4, int send6);
  int fd() const { return fd_; }
  uint32_t slot() const { return slot_; }

  // Since the lease: the table of which local process sends from which
  // port (util/port_attestation.h), mapped read-only; nullptr if the
  // service gave none.
  const PortAttestationTable* attestation() const { return table_; }
  // Whether the kernel brings our datagrams to our own members of the
  // service's UDP 4791 groups (tools/hostd/kernel_steering.h) rather than
  // the service over this connection.
  bool steered() const { return steered_; }
  // Our member socket of the IPv4 (`v4`) or IPv6 group, handed to the
  // caller (once; -1 when none came).
  int take_steered_socket(bool v4);
  // Closes the connection without telling the service anything (a fork
  // child's copy: the parent keeps the lease).
  void abandon();

 private:
  HostService(int fd, uint32_t trusted_uid) : fd_(fd), trusted_uid_(trusted_uid) {}
  bool receive_sockets();
  int fd_;
  uint32_t trusted_uid_;  // SOFTVERBS_HOSTD_UID, as read when we first connected
  uint32_t slot_ = 0;
  const PortAttestationTable* table_ = nullptr;
  bool steered_ = false;
  int steered4_ = -1, steered6_ = -1;
  PrivateVector<ChannelEvent> channel_events_;
};

}  // namespace sv::shm
