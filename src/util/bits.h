// Small integer helpers.
#pragma once

#include <bit>
#include <cstdint>

namespace sv {

// Smallest power of two >= v (v >= 1).
inline uint64_t round_up_pow2(uint64_t v) { return v <= 1 ? 1 : std::bit_ceil(v); }

inline uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) & ~(a - 1); }
inline uint64_t align_down(uint64_t v, uint64_t a) { return v & ~(a - 1); }

inline void cpu_relax() { __builtin_ia32_pause(); }

}  // namespace sv
