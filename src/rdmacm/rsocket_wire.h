// rsockets: what two stream rsockets exchange, described once.
//
// The scheme follows rdma-core's rsockets (librdmacm/rsocket.c) in spirit,
// not bit for bit (see docs/ARCHITECTURE.md, "rsockets"):
//  - Each side owns a receive ring in registered memory; the peer writes
//    stream bytes into it with RDMA WRITE WITH IMMEDIATE, in order, never
//    across the ring's end. The immediate says how many bytes landed.
//  - Every message (data or control) takes one receive WR at the target, so
//    the sender counts message credits as well as ring bytes; the receiver
//    grants both back with CREDIT messages (zero-length WRITE WITH IMM).
//  - Direct placement (riomap/riowrite): a side announces a mapping by
//    writing an IomapEntry into the peer's table (WRITE WITH IMM, IOMAP);
//    riowrite is a plain RDMA WRITE into the memory the entry names.
// The connection's private data (ConnData) says where each side's ring and
// iomap table are.
#pragma once

#include <cstddef>
#include <cstdint>

namespace sv::rdmacm::rs {

// Immediate data: bits 31..29 the operation, bits 28..0 its argument.
enum class Op : uint32_t {
  kData = 0,    // argument: bytes written at the sender's ring position
  kCredit = 1,  // argument: CreditGrant::pack
  kCtrl = 2,    // argument: Ctrl
  kIomap = 3,   // argument: index of the IomapEntry written
};

enum class Ctrl : uint32_t {
  kDisconnect = 1,  // the peer neither reads nor writes any more
  kShutdown = 2,    // the peer writes no more (end of stream after its data)
};

inline constexpr uint32_t kArgBits = 29;
inline constexpr uint32_t kArgMask = (1u << kArgBits) - 1;

constexpr uint32_t imm_pack(Op op, uint32_t arg) {
  return (static_cast<uint32_t>(op) << kArgBits) | (arg & kArgMask);
}
constexpr Op imm_op(uint32_t imm) { return static_cast<Op>(imm >> kArgBits); }
constexpr uint32_t imm_arg(uint32_t imm) { return imm & kArgMask; }

// A credit grant: receive WRs reposted and ring bytes freed since the last
// grant. Both fit one immediate; larger amounts take several grants.
struct CreditGrant {
  static constexpr uint32_t kByteBits = 20;
  static constexpr uint32_t kMaxBytes = (1u << kByteBits) - 1;
  static constexpr uint32_t kMaxMessages = (1u << (kArgBits - kByteBits)) - 1;

  uint32_t messages = 0;
  uint32_t bytes = 0;

  constexpr uint32_t pack() const { return (messages << kByteBits) | bytes; }
  static constexpr CreditGrant unpack(uint32_t arg) {
    return CreditGrant{arg >> kByteBits, arg & kMaxBytes};
  }
};

// One direct-placement mapping, as written into the peer's table. length 0
// marks a free slot.
struct IomapEntry {
  uint64_t offset;  // the riomap offset the peer's riowrite names
  uint64_t addr;
  uint32_t rkey;
  uint32_t length;
};
static_assert(sizeof(IomapEntry) == 24);

// The private data of the connection request (active side) and of the
// accept (passive side). Host byte order: both ends are on this host
// (the flag says so; a peer of the other order is refused).
struct ConnData {
  static constexpr uint8_t kVersion = 0x81;  // not rdma-core's 1: the wire differs
  static constexpr uint8_t kFlagLittleEndian = 1;

  uint8_t version;
  uint8_t flags;
  uint16_t reserved;
  uint32_t rq_credits;  // receive WRs posted for the peer's messages
  uint64_t ring_addr;
  uint32_t ring_rkey;
  uint32_t ring_size;
  uint64_t iomap_addr;  // IomapEntry[iomap_slots] the peer may write
  uint32_t iomap_rkey;
  uint32_t iomap_slots;
};
static_assert(sizeof(ConnData) == 40);
static_assert(sizeof(ConnData) <= 56, "fits the private data of an IB CM REQ");

}  // namespace sv::rdmacm::rs
