// The IBTA's QP timers and retry counts: for the requester, which times the
// retries of the shared-memory path (core/requester.cpp), and the network
// engine, which times its own, as a NIC does (transport/roce_sender.cpp).
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

// The retries a QP's retry_cnt and rnr_retry give. ibv_modify_qp takes any
// value (the kernel, rxe and mlx5 do); above the 3-bit wire field a count
// means 7 retries, the most the field can say (librdmacm reads its counts
// so), but rnr_retry means "forever" only when it is 7 itself: 8 asks for
// retries, not for a QP that never gives up, so it gives 6.
constexpr uint32_t retry_budget(uint8_t retry_cnt) { return retry_cnt > 7 ? 7 : retry_cnt; }
constexpr uint32_t rnr_retry_budget(uint8_t rnr_retry) { return rnr_retry > 7 ? 6 : rnr_retry; }
inline constexpr uint32_t kRnrRetryForever = 7;

}  // namespace sv
