// What the RoCEv2 engine (roce_engine.h) needs of the network under it:
// send a batch of datagrams, the UDP source port its datagrams carry (the
// ICRC covers it), the link's MTU, a clock and an alarm. The process's UDP
// sockets are one wire (roce_udp_wire.h); a test's fake network, which
// drops, duplicates, reorders and delays packets on a virtual clock
// (tests/unit/fake_roce_net.h), is another. eRPC's transport.h with its
// fake transport is the model.
//
// Packets come the other way as the port hands them in (Engine::receive):
// the port first routes what is for other processes of the host (forwarder,
// host service, CM mailboxes, multicast members), which is no business of
// the engine's.
#pragma once

#include <netinet/in.h>

#include <cstddef>
#include <cstdint>

#include "transport/roce_socket.h"

namespace sv::roce {

class Wire {
 public:
  virtual ~Wire() = default;
  // Sends datagrams built whole (BTH to ICRC, at d[i].data); the network
  // may lose any of them.
  virtual void send(OutDatagram* d, size_t count) = 0;
  // The UDP source port of this end's datagrams to `dst`.
  virtual uint16_t source_port(const in6_addr& dst) const = 0;
  // The UDP source port of a datagram to `dst`'s QP `dest_qpn`, and in
  // *lane the socket it leaves by (OutDatagram::lane): by default this
  // end's one port.
  virtual uint16_t source_port_to(const in6_addr& dst, uint32_t dest_qpn, uint8_t* lane) {
    (void)dest_qpn;
    *lane = 0;
    return source_port(dst);
  }
  // The largest IB MTU (256..4096) whose packets the link to `dst` (a
  // group: the link of `src`) carries.
  virtual uint32_t link_mtu(const in6_addr& dst, const in6_addr& src) = 0;
  // The clock the engine's timers run on, in nanoseconds.
  virtual uint64_t now_ns() const = 0;
  // Asks for Engine::on_timers() at `due_ns` (on now_ns()'s clock) or soon
  // after; false when no alarm could be set.
  virtual bool wake_at(uint64_t due_ns) = 0;
  // Whether datagrams to `dst`'s QP `dest_qpn` go through memory (a ring to
  // another process of this host), where no ICRC is computed or checked.
  virtual bool through_memory(const in6_addr& dst, uint32_t dest_qpn) const { return false; }
};

}  // namespace sv::roce
