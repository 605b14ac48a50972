#include "transport/roce_udp_wire.h"

#include <sys/timerfd.h>

#include "net/roce_datagram.h"
#include "net/roce_frame.h"
#include "util/clock.h"

namespace sv::roce {

uint64_t UdpWire::now_ns() const { return monotonic_ns(); }

bool UdpWire::wake_at(uint64_t due_ns) {
  itimerspec when{};
  when.it_value.tv_sec = static_cast<time_t>(due_ns / 1'000'000'000);
  when.it_value.tv_nsec = static_cast<long>(due_ns % 1'000'000'000);
  return timer_fd >= 0 && timerfd_settime(timer_fd, TFD_TIMER_ABSTIME, &when, nullptr) == 0;
}

}  // namespace sv::roce
