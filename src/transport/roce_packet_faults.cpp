#include "transport/roce_packet_faults.h"

#include <algorithm>
#include <cstring>

#include "core/faults.h"
#include "net/roce_datagram.h"
#include "net/roce_opcode.h"
#include "util/clock.h"

namespace sv::roce {

PacketFaults::Copy PacketFaults::copy_of(const OutDatagram& d, uint64_t due_ns) {
  Copy c;
  c.bytes = std::make_unique<uint8_t[]>(net::kDatagramHeadroom + d.len);
  std::memcpy(c.bytes.get(), d.data - net::kDatagramHeadroom, net::kDatagramHeadroom + d.len);
  c.d = d;
  c.d.data = c.bytes.get() + net::kDatagramHeadroom;
  c.due_ns = due_ns;
  return c;
}

void PacketFaults::send(OutDatagram* d, size_t count, const SendFn& send, const SealFn& seal) {
  std::lock_guard g(mu_);
  const uint64_t t = monotonic_ns();
  std::vector<OutDatagram> out;  // what leaves in this batch: as built, or a copy
  std::vector<Copy> copies;
  out.reserve(count + 1);
  auto altered = [&](const OutDatagram& x) -> OutDatagram& {
    copies.push_back(copy_of(x, t));
    return copies.back().d;
  };
  for (size_t i = 0; i < count; ++i) {
    const uint8_t* bth = d[i].data;
    const uint32_t dest_qpn = d[i].len >= net::kBthBytes ? (uint32_t{bth[5]} << 16 | uint32_t{bth[6]} << 8 | bth[7]) : 0;
    const faults::PacketVerdict v = faults::packet_fault(false, d[i].dst, dest_qpn, d[i].len ? bth[0] : 0);
    switch (v.fault) {
      case faults::PacketFault::kNone:
        out.push_back(d[i]);
        break;
      case faults::PacketFault::kDrop:
        break;
      case faults::PacketFault::kDuplicate:
        out.push_back(d[i]);
        out.push_back(altered(d[i]));
        break;
      case faults::PacketFault::kCorrupt:
        // A datagram for a ring carries no ICRC, and a ring checks none:
        // it is lost, as the receiver would lose it.
        if (d[i].unsealed) break;
        {
          OutDatagram& c = altered(d[i]);
          seal(c);
          c.data[c.len - 1] ^= 0x5a;  // (the ICRC's last byte)
          out.push_back(c);
        }
        break;
      case faults::PacketFault::kReorder:
        held_.push_back(copy_of(d[i], t + kReorderHoldNs));
        held_.back().reordered = true;
        break;
      case faults::PacketFault::kDelay:
        held_.push_back(copy_of(d[i], t + v.delay_ns));
        break;
    }
  }
  // Those held for reordering from before this batch go after it.
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->reordered && it->due_ns < t + kReorderHoldNs) {
      out.push_back(it->d);
      copies.push_back(std::move(*it));  // (its bytes stay where they are)
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  if (!out.empty()) send(out.data(), out.size());
}

void PacketFaults::release_due(uint64_t now_ns, const SendFn& send) {
  std::lock_guard g(mu_);
  std::vector<Copy> due;
  for (auto it = held_.begin(); it != held_.end();) {
    if (it->due_ns <= now_ns) {
      due.push_back(std::move(*it));
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  std::vector<OutDatagram> out;
  for (Copy& c : due) out.push_back(c.d);
  if (!out.empty()) send(out.data(), out.size());
}

uint64_t PacketFaults::next_due() const {
  std::lock_guard g(mu_);
  uint64_t due = UINT64_MAX;
  for (const Copy& c : held_) due = std::min(due, c.due_ns);
  return due;
}

}  // namespace sv::roce
