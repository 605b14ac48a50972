#include "transport/roce_udp_wire.h"

#include <sys/timerfd.h>

#include "net/roce_datagram.h"
#include "hostd/datagram_route.h"
#include "net/roce_frame.h"
#include "core/faults.h"
#include "shm/layout.h"
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

uint16_t UdpWire::source_port_to(const in6_addr& dst, uint32_t dest_qpn, uint8_t* lane) {
  // (QP1, the CM's, and a multicast group's DestQP name no process.)
  const bool to_a_process = dest_qpn != 1 && dest_qpn != shm::kMulticastQpn;
  // (The slot of the QPN's home block: a process with more than 256 QPs
  // has blocks of other numbers too, whose packets then come by other
  // lanes, each a flow of its own to steer.)
  *lane = to_a_process && !attestation.load(std::memory_order_acquire) ? shm::home_slot_of_qpn(dest_qpn) : 0;
  return *lane ? sock.lane_port(dst, *lane) : sock.source_port(dst);
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
  if (__builtin_expect(faults::packets_armed(), 0)) {
    packet_faults_.send(
        d, count, [this](OutDatagram* x, size_t n) { send_now(x, n); }, [this](OutDatagram& x) { seal(x); });
    arm_for_held();
    return;
  }
  send_now(d, count);
}

void UdpWire::release_held(uint64_t now_ns) {
  packet_faults_.release_due(now_ns, [this](OutDatagram* x, size_t n) { send_now(x, n); });
  arm_for_held();
}

void UdpWire::arm_for_held() {
  if (packet_faults_.next_due() == UINT64_MAX) return;
  // The engine's alarm stays set, unless it is past (then the network
  // thread is on its way to the engine's timers, which set the next).
  uint64_t engine_due = engine_due_ns_.load(std::memory_order_relaxed);
  if (engine_due <= monotonic_ns()) engine_due = 0;
  arm(engine_due);
}

void UdpWire::send_now(OutDatagram* d, size_t count) {
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
      // (Asked only of a service that is there: one asked while none was
      // would never be asked again.)
      if (shm::HostService* svc = service.load(std::memory_order_acquire); svc && channels.note_asked(peer))
        svc->request_channel(peer);
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
  engine_due_ns_.store(due_ns, std::memory_order_relaxed);
  return arm(due_ns);
}

bool UdpWire::arm(uint64_t due_ns) {
  if (__builtin_expect(faults::packets_armed(), 0)) {
    const uint64_t held = packet_faults_.next_due();  // (a due of 0 disarms: the engine has nothing due)
    if (held != UINT64_MAX && (!due_ns || held < due_ns)) due_ns = held;
  }
  itimerspec when{};
  when.it_value.tv_sec = static_cast<time_t>(due_ns / 1'000'000'000);
  when.it_value.tv_nsec = static_cast<long>(due_ns % 1'000'000'000);
  return timer_fd >= 0 && timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &when, nullptr) == 0;
}

}  // namespace sv::roce
