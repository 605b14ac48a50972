// Reaching bytes of an MR that belongs to `owner` (possibly this process):
// directly for our own memory, through the arena overlay for overlaid MRs,
// and with process_vm_readv/writev for the rest.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include "core/limits.h"
#include "core/mr.h"
#include "shm/peers.h"

namespace sv {

// Small payloads (the common message) are copied inline: a call into libc's
// memcpy costs more than the copy.
inline void copy_bytes(void* dst, const void* src, size_t len) {
  if (len <= 16) {
    auto* d = static_cast<uint8_t*>(dst);
    const auto* s = static_cast<const uint8_t*>(src);
    if (len >= 8) {
      uint64_t a, b;
      std::memcpy(&a, s, 8);
      std::memcpy(&b, s + len - 8, 8);
      std::memcpy(d, &a, 8);
      std::memcpy(d + len - 8, &b, 8);
    } else {
      for (size_t i = 0; i < len; ++i) d[i] = s[i];
    }
    return;
  }
  std::memcpy(dst, src, len);
}

// Where `addr` of an overlaid MR is in our mapping of the owner's arena.
// Also for our own MRs: a packet from the network that lands after the
// application unmapped its registered buffer (without deregistering it)
// goes to the pages the MR still holds, as on a NIC, not to a fault.
inline uint8_t* overlay_ptr(const shm::Peer& owner, const MrView& mr, uint64_t addr, size_t len) {
  static_assert(limits::kMaxMsgSize <= shm::kOverlayReach, "a message fits one overlay window's mapping");
  const uint64_t off = mr.overlay_offset(addr);
  return off ? owner.overlay(off, len) : nullptr;
}

// RDMA WRITE data lands as a NIC's DMA puts it: in address order, each byte
// once, the last byte last. Applications poll the last byte of a WRITE to
// learn that it has landed, then write the buffer themselves (riostream,
// ping-pong benchmarks). libc's memcpy gives no such order: with 64-byte
// vectors a 64-byte copy stores all its bytes twice, so a target that saw
// the last byte from the first store and wrote its next marker could have
// it undone by the second (riostream then hung, both sides waiting). So the
// last 64 bytes are stored 16 bytes at a time (x86: one SSE store each; x86
// stores become visible in program order) or 8 (elsewhere), in order,
// after the rest is complete.
inline void place_bytes(void* dst, const void* src, size_t len) {
  auto* d = static_cast<uint8_t*>(dst);
  const auto* s = static_cast<const uint8_t*>(src);
  constexpr size_t kTail = 64;
  if (len > kTail) {
    std::memcpy(d, s, len - kTail);
#if defined(__x86_64__)
    __builtin_ia32_sfence();  // a large memcpy may use weakly ordered (non-temporal) stores
#endif
    d += len - kTail;
    s += len - kTail;
    len = kTail;
  }
  size_t i = 0;
#if defined(__x86_64__)
  for (; i + 16 <= len; i += 16) {  // one store instruction each (two 8-byte halves could be reordered)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
    std::atomic_signal_fence(std::memory_order_seq_cst);  // keeps the stores apart and in order
  }
#endif
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    std::memcpy(&w, s + i, 8);
    std::memcpy(d + i, &w, 8);
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  for (; i < len; ++i) {
    d[i] = s[i];
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
}

// write_to_mr() for what is not overlaid: our own memory, process_vm_writev,
// the owner's bounce thread.
bool write_to_mr_slow(const shm::Peer& owner, const MrView& mr, uint64_t addr, const void* src, size_t len);

// `addr` is an iova-space address inside `mr` (the caller checked bounds).
// Inline for the common case (an overlaid MR: plain stores into shared
// pages), which is on every intra-host WRITE and SEND.
inline bool write_to_mr(const shm::Peer& owner, const MrView& mr, uint64_t addr, const void* src, size_t len) {
  if (len == 0) return true;
  if (__builtin_expect(mr.path != shm::kMrOverlay, 0)) return write_to_mr_slow(owner, mr, addr, src, len);
  uint8_t* p = overlay_ptr(owner, mr, addr, len);
  if (!p) return false;
  place_bytes(p, src, len);
  return true;
}

// read_from_mr() for what is not overlaid: our own memory, process_vm_readv,
// the owner's bounce thread.
bool read_from_mr_slow(const shm::Peer& owner, const MrView& mr, uint64_t addr, void* dst, size_t len);

// `addr` is an iova-space address inside `mr` (the caller checked bounds).
// Inline for the overlaid case, the twin of write_to_mr(): every intra-host
// RDMA READ between two processes.
inline bool read_from_mr(const shm::Peer& owner, const MrView& mr, uint64_t addr, void* dst, size_t len) {
  if (len == 0) return true;
  if (__builtin_expect(mr.path != shm::kMrOverlay, 0)) return read_from_mr_slow(owner, mr, addr, dst, len);
  const uint8_t* p = overlay_ptr(owner, mr, addr, len);
  if (!p) return false;
  copy_bytes(dst, p, len);
  return true;
}

// An RDMA atomic (compare-and-swap or fetch-and-add) on the 8 aligned bytes
// at `addr`; `original` receives the value before the operation. Memory in
// a shared mapping (our own, or overlaid) uses CPU atomics; memory reached
// with process_vm_* is updated under the host's atomic lock for its address.
bool atomic_on_mr(const shm::Peer& owner, shm::RegistryHeader& registry, const MrView& mr, uint64_t addr,
                  ibv_wr_opcode op, uint64_t compare_add, uint64_t swap, uint64_t* original);

}  // namespace sv
