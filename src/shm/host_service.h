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

#include "util/host_service_socket.h"
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
  // names it.
  static std::unique_ptr<HostService> connect();
  ~HostService();
  HostService(const HostService&) = delete;
  HostService& operator=(const HostService&) = delete;

  // Asks for registry slot `slot`: true when it is ours on the whole host.
  // False when another process holds it (its uid in *holder), or when the
  // service does not answer (then *holder = UINT32_MAX).
  bool lease(uint32_t slot, uint32_t* holder);
  // Receives one datagram the service forwarded, without blocking: its
  // length (its header in *h), or -1 when none waits (errno EAGAIN) or the
  // service is gone (errno EPIPE: it closed the connection).
  ssize_t receive(uint8_t* buf, size_t cap, hostd::DatagramHeader* h);
  // Hands the service a datagram for a QP of this host (`h` says where
  // from and to): local processes reach each other only this way. False
  // when it could not take it now (a lost packet, to RoCE).
  bool send(const hostd::DatagramHeader& h, const uint8_t* data, size_t len);
  // Tells the service our network thread runs: CM MADs (QP1) and
  // multicast datagrams for our user may come to us from now on.
  void network_up();
  int fd() const { return fd_; }
  uint32_t slot() const { return slot_; }
  // Closes the connection without telling the service anything (a fork
  // child's copy: the parent keeps the lease).
  void abandon();

 private:
  explicit HostService(int fd) : fd_(fd) {}
  int fd_;
  uint32_t slot_ = 0;
};

}  // namespace sv::shm
