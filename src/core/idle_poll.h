// When a thread that busy-polls an empty CQ gives its core away.
//
// With network traffic, a packet waits for a thread of its receiving
// process to run: the application thread that polls (which drains the
// sockets itself, RoceTransport::progress) or the network thread. A NIC, or
// rxe in the kernel's softirq, needs no CPU of the application's; softverbs
// does. Where more threads spin than there are cores (four MPI ranks on two
// cores, each polling, each with a network thread), a rank whose packet came
// waits for the scheduler to take the core from a spinning one: a whole time
// slice, milliseconds a message (bench/mpi_hosts.py, 4 ranks: 8-byte
// latency ~1 ms, alltoall 8 B ~90 ms; Open MPI's mpi_yield_when_idle, which
// yields at every empty progress, took them to 65 us and 0.4 ms). So a
// thread that has polled empty for a while (poll_yield_us, 20 us: longer
// than a round trip between two processes of one host, shorter than one
// between hosts) yields at each further empty poll. With no other thread
// ready to run, a yield costs a system call (well under a microsecond) and
// the poll goes on. A poll that finds the CQ empty again after a gap (the
// thread was doing something else, or the core was given away and came
// back) starts a new wait, polled without yields at first.
#pragma once

#include <cstdint>

namespace sv {

class IdlePoll {
 public:
  // A gap longer than this between two empty polls ends a wait.
  static constexpr uint64_t kGapNs = 5'000;

  explicit IdlePoll(uint64_t yield_after_ns) : yield_after_ns_(yield_after_ns) {}

  // An empty poll at `now_ns`: whether to yield now.
  bool empty_poll(uint64_t now_ns) {
    if (!yield_after_ns_) return false;
    if (now_ns - last_ns_ > kGapNs) since_ns_ = now_ns;
    last_ns_ = now_ns;
    return now_ns - since_ns_ >= yield_after_ns_;
  }

 private:
  uint64_t yield_after_ns_;
  uint64_t since_ns_ = 0;  // when this wait began
  uint64_t last_ns_ = 0;   // the last empty poll
};

// The calling thread polled an empty CQ with the network in use: yields its
// core if it has been waiting long enough (knobs().poll_yield_us).
void idle_poll();

}  // namespace sv
