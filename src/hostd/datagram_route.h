// Where a RoCEv2 datagram that reached this host goes: the one rule that
// the host service (tools/hostd), the BPF program it gives the kernel
// (hostd/steering.h) and a process that received another's packet
// (transport/roce_transport.cpp) all follow. A datagram is for the process
// whose registry slot its BTH DestQP carries (shm/layout.h: a home block's QPN = slot <<
// 16 | index); QP1 (CM MADs) and the multicast QPN are for no one process.
#pragma once

#include <cstddef>
#include <cstdint>

#include "net/roce_header.h"
#include "net/roce_opcode.h"
#include "shm/layout.h"

namespace sv::hostd {

enum class Destination : uint8_t {
  kProcess,    // the process of `slot`
  kCm,         // QP1: the CM of whoever claimed its mailbox
  kMulticast,  // every member process
  kMalformed,  // too short to be RoCEv2
};

struct Route {
  Destination to = Destination::kMalformed;
  uint32_t slot = 0;  // kProcess: the registry slot
};

// The byte of the BTH (from the UDP payload on) that holds a DestQP's slot:
// DestQP is bytes 5..7, the slot its first (shm::home_slot_of_qpn). The kernel's
// steering program reads this byte alone (tools/hostd/kernel_steering.cpp).
inline constexpr size_t kDestQpSlotByte = 5;
static_assert(shm::home_slot_of_qpn(0xab0000) == 0xab);

// The BTH DestQP of a datagram (from its UDP payload on).
inline uint32_t dest_qpn(const uint8_t* datagram) { return net::be::get24(datagram + 5); }

// One datagram, `len` bytes from its BTH on, ICRC included. `slot_of`
// says which slot holds a QPN: the home rule, the service's; a process
// reads its registry's blocks (shm::qpn_owner), where a process that is not
// the service's may hold blocks that are not its home.
inline Route route_of(const uint8_t* datagram, size_t len, uint32_t (*slot_of)(uint32_t) = shm::home_slot_of_qpn) {
  if (len < net::kBthBytes + net::kIcrcBytes) return {};
  const uint32_t qpn = dest_qpn(datagram);
  if (qpn == 1) return {Destination::kCm, 0};
  if (qpn == shm::kMulticastQpn) return {Destination::kMulticast, 0};
  const uint32_t slot = slot_of(qpn);
  if (slot == 0) return {};  // (the home rule: QPNs below 65536 are no process's)
  return {Destination::kProcess, slot};
}

// A GRO buffer: datagrams of `seg` bytes back to back (the last may be
// shorter), `len` in all. The slot all of them are for, when they are all
// for one process's QPs (they can then go on whole, in one message);
// else 0. 0 also for a single datagram (seg 0 or len <= seg).
inline uint32_t whole_buffer_slot(const uint8_t* data, size_t len, uint16_t seg,
                                  uint32_t (*slot_of)(uint32_t) = shm::home_slot_of_qpn) {
  if (!seg || len <= seg) return 0;
  uint32_t slot = 0;
  for (size_t off = 0; off < len; off += seg) {
    const size_t n = len - off < seg ? len - off : seg;
    const Route r = route_of(data + off, n, slot_of);
    if (r.to != Destination::kProcess || (off && r.slot != slot)) return 0;
    slot = r.slot;
  }
  return slot;
}

}  // namespace sv::hostd
