// The intra-host transport: the target QP is in the shared memory of a
// process of this host, found from its QPN alone (registry slot in the high
// bits, QP table index in the low bits). The initiator runs the responder on
// the target's queues and returns its answer at once: no target thread, no
// system call when the target's memory is overlaid (shm/overlay.h).
#pragma once

#include "core/transport.h"
#include "shm/host.h"
#include "transport/shm_connections.h"
#include "util/private_heap.h"

namespace sv {

class ShmTransport final : public Transport, public PrivateHeapObject {
 public:
  // `wire`: the network transport, which carries a multicast send to the
  // group's members on other hosts (nullptr: this host only).
  ShmTransport(shm::Host& host, Transport* wire);
  const char* name() const override { return "shm"; }
  Response deliver(const Message& m) override;
  // Opens the QP's connection entry (and tells the capture its PSNs and MTU).
  void ready_to_send(uint32_t qpn, const SendParams& p, SendAnswers& answers) override;
  void forget_qp(uint32_t qpn, bool wait) override;

 private:
  Response deliver_to_qp(const Message& m);
  __attribute__((noinline)) Response deliver_uncached(const Message& m, ShmConnection* c);
  Response deliver_to_group(const Message& m);
  Response deliver_captured(const Message& m);

  shm::Host& host_;
  Transport* const wire_;
  ShmConnections connections_;  // of our connected QPs, by QP index
  // SOFTVERBS_PCAP is set: every exchange is also written as RoCEv2 packets
  // (shm_capture.h). Read once, so an unset variable costs one branch.
  const bool capture_;
};


}  // namespace sv
