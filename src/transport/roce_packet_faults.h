// Packet faults between hosts (SOFTVERBS_FAULTS packet= rules) on the way
// out: what the rules drop, duplicate, corrupt, reorder or delay, applied to
// a batch of datagrams before it reaches the sockets. Only the process's
// wire (roce_udp_wire.h) uses it, and only when a packet rule exists
// (faults::packets_armed()): otherwise the batch goes straight on. The way
// in (drop, duplicate, corrupt) is decided where a datagram is handed to
// the engine (roce_transport.cpp), the verdicts by core/faults.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/roce_socket.h"

namespace sv::roce {

class PacketFaults {
 public:
  using SendFn = std::function<void(OutDatagram*, size_t)>;
  using SealFn = std::function<void(OutDatagram&)>;

  // Sends d[0..count) through `send` as the rules have it: a copy of what
  // is altered, nothing of what is dropped; what a reorder fault held from
  // an earlier batch goes after this one. `seal` gives a datagram built
  // for a ring its ICRC (a corrupted one must have one to be wrong).
  void send(OutDatagram* d, size_t count, const SendFn& send, const SealFn& seal);
  // Sends what is held and due by `now_ns`.
  void release_due(uint64_t now_ns, const SendFn& send);
  // When the next held datagram is due (UINT64_MAX: none held).
  uint64_t next_due() const;

 private:
  // A reordered packet waits at most this long for a packet to overtake it.
  static constexpr uint64_t kReorderHoldNs = 1'000'000;
  struct Copy {
    std::unique_ptr<uint8_t[]> bytes;  // headroom + datagram
    OutDatagram d;
    uint64_t due_ns = 0;
    bool reordered = false;  // (goes after the next batch)
  };
  static Copy copy_of(const OutDatagram& d, uint64_t due_ns);
  mutable std::mutex mu_;
  std::vector<Copy> held_;
};

}  // namespace sv::roce
