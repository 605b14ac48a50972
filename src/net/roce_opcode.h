// The RoCEv2 opcode table (IBTA vol 1, 9.2-9.4; Linux rxe_opcode.c): for
// every opcode we speak, its name, which extension headers follow the BTH
// and at which offsets, whether it carries payload, and where it sits in a
// message. The requester, responder and codec all read this one table, so
// a header layout is written down exactly once.
//
// Opcode = transport base (top 3 bits) | operation (low 5 bits). Covered:
// RC 0x00-0x14, 0x16, 0x17; UC 0x20-0x2b; UD 0x64, 0x65; XRC 0xa0 + the RC
// operations. XRC requests carry an XRCETH right after the BTH (IBTA annex
// A14); XRC responses, like RC ones, carry none. Not covered: RD, CNP,
// RESYNC (0x15), FLUSH (0x1c), ATOMIC_WRITE (0x1d).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace sv::net {

// Header sizes in bytes, as they travel.
inline constexpr size_t kBthBytes = 12;
inline constexpr size_t kRethBytes = 16;
inline constexpr size_t kAethBytes = 4;
inline constexpr size_t kAtomicEthBytes = 28;
inline constexpr size_t kAtomicAckEthBytes = 8;
inline constexpr size_t kImmDtBytes = 4;
inline constexpr size_t kIethBytes = 4;
inline constexpr size_t kDethBytes = 8;
inline constexpr size_t kXrcethBytes = 4;
inline constexpr size_t kIcrcBytes = 4;

// The extension headers an opcode may carry after the BTH.
enum class Ext : uint8_t { kXrceth, kReth, kAeth, kAtomicEth, kAtomicAckEth, kImmDt, kIeth, kDeth };
inline constexpr size_t kExtCount = 8;
inline constexpr size_t kMaxExtPerOpcode = 3;  // XRC RDMA_WRITE_ONLY_WITH_IMMEDIATE

constexpr size_t ext_bytes(Ext e) {
  constexpr size_t sizes[kExtCount] = {kXrcethBytes, kRethBytes,  kAethBytes, kAtomicEthBytes,
                                       kAtomicAckEthBytes, kImmDtBytes, kIethBytes, kDethBytes};
  return sizes[static_cast<size_t>(e)];
}

// Transport bases (the opcode's top 3 bits).
inline constexpr uint8_t kTransportMask = 0xE0;
inline constexpr uint8_t kTransportRc = 0x00;
inline constexpr uint8_t kTransportUc = 0x20;
inline constexpr uint8_t kTransportUd = 0x60;
inline constexpr uint8_t kTransportXrc = 0xA0;

// Operations (the opcode's low 5 bits), shared by every transport.
enum Operation : uint8_t {
  kSendFirst = 0x00,
  kSendMiddle = 0x01,
  kSendLast = 0x02,
  kSendLastImm = 0x03,
  kSendOnly = 0x04,
  kSendOnlyImm = 0x05,
  kWriteFirst = 0x06,
  kWriteMiddle = 0x07,
  kWriteLast = 0x08,
  kWriteLastImm = 0x09,
  kWriteOnly = 0x0A,
  kWriteOnlyImm = 0x0B,
  kReadRequest = 0x0C,
  kReadResponseFirst = 0x0D,
  kReadResponseMiddle = 0x0E,
  kReadResponseLast = 0x0F,
  kReadResponseOnly = 0x10,
  kAck = 0x11,
  kAtomicAck = 0x12,
  kCompareSwap = 0x13,
  kFetchAdd = 0x14,
  kSendLastInv = 0x16,
  kSendOnlyInv = 0x17,
};

// What an opcode is (bits of OpcodeInfo::flags).
enum OpcodeFlag : uint32_t {
  kRequest = 1u << 0,   // sent by the requester
  kResponse = 1u << 1,  // sent by the responder
  kPayload = 1u << 2,   // data follows the headers (possibly 0 bytes)
  kFirst = 1u << 3,     // position within a multi-packet message...
  kMiddle = 1u << 4,
  kLast = 1u << 5,
  kOnly = 1u << 6,      // ...or the whole message in one packet
  kSend = 1u << 7,
  kWrite = 1u << 8,
  kRead = 1u << 9,      // read request and read responses
  kAtomic = 1u << 10,   // atomic requests and their ACK
  kAckOp = 1u << 11,    // ACKNOWLEDGE (plain ACK / NAK)
  kImm = 1u << 12,      // carries ImmDt
  kInv = 1u << 13,      // carries IETH
};

struct OpcodeInfo {
  uint8_t opcode;
  const char* name;  // Linux ib_pack.h name without IB_OPCODE_, e.g. "RC_SEND_FIRST"
  uint32_t flags;    // OpcodeFlag bits
  uint8_t ext_count;
  Ext ext[kMaxExtPerOpcode];  // in wire order
  uint8_t offset[kExtCount];  // byte offset from the start of the BTH; 0 = absent
  uint8_t header_bytes;       // BTH + extension headers: where the payload starts

  constexpr bool has(Ext e) const { return offset[static_cast<size_t>(e)] != 0; }
  constexpr size_t offset_of(Ext e) const { return offset[static_cast<size_t>(e)]; }
  constexpr bool is(uint32_t flag) const { return (flags & flag) != 0; }
  constexpr bool starts_message() const { return is(kFirst | kOnly); }
  constexpr bool ends_message() const { return is(kLast | kOnly); }
  constexpr uint8_t transport() const { return opcode & kTransportMask; }
};

// The entry of `opcode`, or nullptr when we do not know that opcode.
const OpcodeInfo* opcode_info(uint8_t opcode);
// Every entry, in opcode order.
std::span<const OpcodeInfo> opcode_table();

}  // namespace sv::net
