#include "transport/roce_udp_wire.h"

#include <sys/timerfd.h>

#include "net/roce_datagram.h"
#include "net/roce_frame.h"
#include "util/clock.h"
#include "util/host_service_socket.h"

namespace sv::roce {

void UdpWire::send(OutDatagram* d, size_t count) {
  shm::HostService* const svc = service.load(std::memory_order_acquire);
  if (!svc) {
    sock.send_many(d, count);
    return;
  }
  // Runs of datagrams to other hosts go together (GSO); each one to this
  // host goes to the service.
  size_t run = 0;
  for (size_t i = 0; i < count; ++i) {
    if (net::is_multicast(d[i].dst) || !interface_of(d[i].dst)) continue;
    if (i > run) sock.send_many(d + run, i - run);
    run = i + 1;
    hostd::DatagramHeader h;
    h.src = d[i].src;
    h.dst = d[i].dst;
    h.src_port = sock.source_port(d[i].dst);
    h.dst_port = d[i].dst_port;
    h.traffic_class = d[i].traffic_class;
    (void)svc->send(h, d[i].data, d[i].len);  // (refused: a lost packet)
  }
  if (count > run) sock.send_many(d + run, count - run);
}

uint64_t UdpWire::now_ns() const { return monotonic_ns(); }

bool UdpWire::wake_at(uint64_t due_ns) {
  itimerspec when{};
  when.it_value.tv_sec = static_cast<time_t>(due_ns / 1'000'000'000);
  when.it_value.tv_nsec = static_cast<long>(due_ns % 1'000'000'000);
  return timer_fd >= 0 && timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &when, nullptr) == 0;
}

}  // namespace sv::roce
