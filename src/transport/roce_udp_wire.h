// The wire of a real process (roce_wire.h): its UDP sockets, the forwarding
// socket that brings packets the port owner received for it
// (roce_forward.h), the sockets of flows steered to it (roce_steering.h),
// its connection to the host service when one runs
// (shm/host_service.h), and the timerfd that wakes the network thread.
#pragma once

#include <atomic>

#include "shm/host_service.h"
#include "transport/roce_forward.h"
#include "transport/roce_packet_faults.h"
#include "transport/roce_peer_channels.h"
#include "transport/roce_socket.h"
#include "transport/roce_steering.h"
#include "transport/roce_wire.h"

namespace sv::roce {

class UdpWire final : public Wire {
 public:
  RoceSocket sock;
  Forwarder fwd;  // packets for this process, from the port owner
  // With a host service, it owns the port and brings our packets; `fwd`
  // stays closed. nullptr without one, or once it died.
  std::atomic<shm::HostService*> service{nullptr};
  // With a host service: which local process sends from which port
  // (util/port_attestation.h). Kept when the service is lost: the ports it
  // vouched for stay held by their processes.
  std::atomic<const PortAttestationTable*> attestation{nullptr};
  // With a host service: rings to other users' processes of this host.
  PeerChannels channels;
  std::atomic<uint32_t> own_slot{0};
  SteeredFlows steered;  // flows the kernel brings straight to us, past the shared port
  int timer_fd = -1;  // the network thread's alarm
  int wake_fd = -1;   // an eventfd: the network thread has more sockets to watch (`steered` grew)

  // On our UDP sockets, to this host's addresses too (with a host service,
  // from ports it vouches for as ours); to another user's process of this
  // host through the rings to it once the service made them (asked for the
  // first time one is for it).
  void send(OutDatagram* d, size_t count) override;
  uint16_t source_port(const in6_addr& dst) const override { return sock.source_port(dst); }
  // Without a host service, a port per process of the peer host (the slot
  // its DestQP carries; RoceSocket::lane_port). With one, the two ports it
  // vouches for as ours, and the rings.
  uint16_t source_port_to(const in6_addr& dst, uint32_t dest_qpn, uint8_t* lane) override;
  uint32_t link_mtu(const in6_addr& dst, const in6_addr& src) override { return link_ib_mtu(dst, src); }
  uint64_t now_ns() const override;
  bool wake_at(uint64_t due_ns) override;
  bool through_memory(const in6_addr& dst, uint32_t dest_qpn) const override;
  // Sends what packet faults held (delay, reorder) and is due by `now_ns`
  // (the network thread's, at each wake).
  void release_held(uint64_t now_ns);

 private:
  // `slot` when a datagram to `dst` for a QP of registry slot `slot` is for
  // another process of this host (a ring's, once one is open to it); 0 when
  // it is for another host, or for us. The one rule both through_memory()
  // (a packet built without its ICRC) and send() (which way it goes) apply.
  uint32_t local_peer(const in6_addr& dst, uint32_t slot) const;
  void seal(OutDatagram& d) const;
  void send_now(OutDatagram* d, size_t count);
  // The alarm at `due_ns`, or earlier when packet faults hold something.
  bool arm(uint64_t due_ns);
  void arm_for_held();  // the alarm for what packet faults hold, if anything
  PacketFaults packet_faults_;  // (only with SOFTVERBS_FAULTS packet= rules)
  std::atomic<uint64_t> engine_due_ns_{0};  // what the engine asked of wake_at
};

}  // namespace sv::roce
