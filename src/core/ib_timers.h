// The IBTA's QP timers in nanoseconds, for the requester that waits out an
// RNR NAK (core/requester.cpp) and the network engine's ACK timer
// (transport/roce_sender.cpp).
#pragma once

#include <cstdint>

namespace sv {

// Local ACK timeout: 4.096 us * 2^timeout (IBTA vol 1, 9.7.6.1.3).
constexpr uint64_t ack_timeout_ns(uint8_t timeout) { return 4096ull << (timeout & 31); }
// Timeout 0 means no limit; lost packets still go again, this often.
inline constexpr uint64_t kForeverRetryNs = 100'000'000;

// RNR NAK timer field to microseconds x 100 (IBTA vol 1, table 45).
inline constexpr uint32_t kRnrTimerCentiUs[32] = {
    65536, 1,    2,    3,    4,    6,    8,    12,   16,   24,    32,    48,    64,    96,    128,   192,
    256,   384,  512,  768,  1024, 1536, 2048, 3072, 4096, 6144,  8192,  12288, 16384, 24576, 32768, 49152};
constexpr uint64_t rnr_delay_ns(uint8_t code) { return uint64_t{kRnrTimerCentiUs[code & 31]} * 10'000; }

}  // namespace sv
