// What this device can do, in one place. ibv_query_device reports these
// numbers and the verbs enforce them, so the two can never disagree.
#pragma once

#include <cstdint>

#include "shm/layout.h"

namespace sv::limits {

inline constexpr uint32_t kMaxQp = shm::kMaxQps;       // QPN index bits per process
inline constexpr uint32_t kMaxQpWr = 32768;
inline constexpr uint32_t kMaxSge = 32;
inline constexpr uint32_t kMaxSgeRd = 32;
inline constexpr uint32_t kMaxCq = 65536;
inline constexpr uint32_t kMaxCqe = 4194303;           // 2^22 - 1
inline constexpr uint32_t kMaxMr = shm::kMaxMrs - 1;   // index 0 is never a key
inline constexpr uint32_t kMaxPd = 65536;
inline constexpr uint32_t kMaxAh = 65536;
inline constexpr uint32_t kMaxSrq = shm::kMaxSrqs - 1;
inline constexpr uint32_t kMaxSrqWr = 32768;
inline constexpr uint32_t kMaxSrqSge = 32;
inline constexpr uint32_t kMaxQpRdAtom = 16;
inline constexpr uint32_t kMaxQpInitRdAtom = 16;
inline constexpr uint32_t kMaxInline = 1024;
inline constexpr uint32_t kMaxTsoHeader = 512;          // bytes of header a TSO work request carries (mlx5: a WQE's inline room)
inline constexpr uint32_t kMaxTso = 256 * 1024;         // payload of one TSO work request
inline constexpr uint32_t kMaxRwqIndTableLog = 16;
inline constexpr uint32_t kInlineGranule = 64;
inline constexpr uint64_t kMaxMrSize = 1ull << 47;
inline constexpr uint64_t kMaxDmSize = 1ull << 20;  // device memory per process (ibv_alloc_dm)
inline constexpr uint32_t kMaxMsgSize = 1u << 31;
inline constexpr uint32_t kMtuBytes = 4096;            // port MTU (IBV_MTU_4096)
inline constexpr int kNumCompVectors = 1;
inline constexpr int kGidTableLen = 128;
inline constexpr uint32_t kMaxPkeys = 1;
inline constexpr uint16_t kDefaultPkey = 0xffff;
inline constexpr uint64_t kCoreClockKhz = 1000000;     // timestamps count nanoseconds

}  // namespace sv::limits
