#include "transport/roce_udp_wire.h"

#include <sys/timerfd.h>

#include "net/roce_datagram.h"
#include "hostd/datagram_route.h"
#include "net/roce_frame.h"
#include "util/clock.h"

namespace sv::roce {

// A datagram built for a ring that goes by UDP after all (its rings closed
// in between): its ICRC now, or the receiver drops it.
void UdpWire::seal(OutDatagram& d) const {
  if (!d.unsealed) return;
  net::DatagramAddrs a;
  a.src_ip = d.src;
  a.dst_ip = d.dst;
  a.src_port = sock.source_port(d.dst);
  a.dst_port = d.dst_port;
  net::put_datagram_icrc(a, d.data - net::kDatagramHeadroom, d.len);
  d.unsealed = false;
}

uint32_t UdpWire::local_peer(const in6_addr& dst, uint32_t slot) const {
  return slot && slot != own_slot.load(std::memory_order_relaxed) && is_local_address(dst) ? slot : 0;
}

bool UdpWire::through_memory(const in6_addr& dst, uint32_t dest_qpn) const {
  if (!attestation.load(std::memory_order_acquire)) return false;
  const uint32_t peer = local_peer(dst, (dest_qpn >> 16) & 0xff);  // (the DestQP byte hostd::kDestQpSlotByte is)
  return peer && channels.open_to(peer);
}

void UdpWire::send(OutDatagram* d, size_t count) {
  if (!attestation.load(std::memory_order_acquire)) {  // (no service: no rings)
    sock.send_many(d, count);
    return;
  }
  size_t run = 0;  // d[run..i) go by UDP
  for (size_t i = 0; i < count; ++i) {
    const uint32_t peer = local_peer(d[i].dst, d[i].len > hostd::kDestQpSlotByte ? d[i].data[hostd::kDestQpSlotByte] : 0);
    if (!peer) {  // another host's, or ours
      seal(d[i]);
      continue;
    }
    if (!channels.put(peer, d[i], sock.source_port(d[i].dst))) {
      if (channels.note_asked(peer))
        if (shm::HostService* svc = service.load(std::memory_order_acquire)) svc->request_channel(peer);
      seal(d[i]);
      continue;  // by UDP until the rings come
    }
    if (i > run) sock.send_many(d + run, i - run);
    run = i + 1;
  }
  if (count > run) sock.send_many(d + run, count - run);
  channels.publish();
}

uint64_t UdpWire::now_ns() const { return monotonic_ns(); }

bool UdpWire::wake_at(uint64_t due_ns) {
  itimerspec when{};
  when.it_value.tv_sec = static_cast<time_t>(due_ns / 1'000'000'000);
  when.it_value.tv_nsec = static_cast<long>(due_ns % 1'000'000'000);
  return timer_fd >= 0 && timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &when, nullptr) == 0;
}

}  // namespace sv::roce
