// The RoCEv2 transport headers (IBTA vol 1, 9.2-9.3; Linux rxe_hdr.h) as
// plain structs in host order, and their big-endian encoding. A packet is
// BTH, then the extension headers its opcode calls for (roce_opcode.h),
// then the payload, PadCnt pad bytes and the 4-byte ICRC (icrc.h).
//
// Fields narrower than their C++ type (24-bit QPNs, PSNs, MSNs, 2-bit pad,
// 4-bit TVer) are masked to their width on encode and decode.
#pragma once

#include <cstddef>
#include <cstdint>

#include "roce_opcode.h"

namespace sv::net {

inline constexpr uint32_t kMask24 = 0xFFFFFF;
inline constexpr uint16_t kDefaultPkey = 0xFFFF;
inline constexpr uint32_t kGsiQkey = 0x80010000;  // the Q_Key of QP1, the GSI

// Big-endian loads and stores at any alignment: every RoCE field is
// big-endian, and AtomicETH's 64-bit fields are not even 4-aligned.
namespace be {
constexpr void put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
constexpr void put24(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v >> 16);
  put16(p + 1, static_cast<uint16_t>(v));
}
constexpr void put32(uint8_t* p, uint32_t v) {
  put16(p, static_cast<uint16_t>(v >> 16));
  put16(p + 2, static_cast<uint16_t>(v));
}
constexpr void put64(uint8_t* p, uint64_t v) {
  put32(p, static_cast<uint32_t>(v >> 32));
  put32(p + 4, static_cast<uint32_t>(v));
}
constexpr uint16_t get16(const uint8_t* p) { return static_cast<uint16_t>(p[0] << 8 | p[1]); }
constexpr uint32_t get24(const uint8_t* p) { return uint32_t{p[0]} << 16 | get16(p + 1); }
constexpr uint32_t get32(const uint8_t* p) { return uint32_t{get16(p)} << 16 | get16(p + 2); }
constexpr uint64_t get64(const uint8_t* p) { return uint64_t{get32(p)} << 32 | get32(p + 4); }
}  // namespace be

struct Bth {
  uint8_t opcode = 0;
  bool se = false;   // solicited event
  bool mig = false;  // MigReq
  uint8_t pad = 0;   // PadCnt: pad bytes after the payload, 0-3
  uint8_t tver = 0;  // transport header version, always 0
  uint16_t pkey = kDefaultPkey;
  bool fecn = false, becn = false;  // congestion bits; not covered by the ICRC
  uint32_t dest_qp = 0;
  bool ack_req = false;
  uint32_t psn = 0;

  bool operator==(const Bth&) const = default;
};

struct Reth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint32_t len = 0;  // DMA length of the whole message
  bool operator==(const Reth&) const = default;
};

struct Aeth {
  uint8_t syndrome = 0;  // see aeth_ack / aeth_rnr_nak / aeth_nak below
  uint32_t msn = 0;
  bool operator==(const Aeth&) const = default;
};

struct AtomicEth {
  uint64_t va = 0;
  uint32_t rkey = 0;
  uint64_t swap_add = 0;  // swap value (CMP_SWAP) or addend (FETCH_ADD)
  uint64_t compare = 0;
  bool operator==(const AtomicEth&) const = default;
};

struct Deth {
  uint32_t qkey = 0;
  uint32_t src_qp = 0;
  bool operator==(const Deth&) const = default;
};

struct Xrceth {
  uint32_t srqn = 0;
  bool operator==(const Xrceth&) const = default;
};

// One transport packet. Only the headers the opcode carries are meaningful
// (opcode_info(bth.opcode)->has(...)); encode ignores the others and decode
// leaves them at their defaults.
struct RocePacket {
  Bth bth;
  Xrceth xrceth;
  Deth deth;
  Reth reth;
  Aeth aeth;
  AtomicEth atomic_eth;
  uint64_t atomic_ack = 0;  // AtomicAckETH: the original remote data
  uint32_t imm = 0;         // ImmDt, read big-endian (ibv_wc.imm_data is htonl of it)
  uint32_t ieth = 0;        // IETH: the R_Key to invalidate
  // Decode points these into the decoded buffer (pad excluded); encode
  // does not use them.
  const uint8_t* payload = nullptr;
  size_t payload_len = 0;
};

// Pad bytes that bring a payload of `len` bytes to a multiple of 4.
constexpr uint8_t pad_for(size_t len) { return static_cast<uint8_t>((4 - (len & 3)) & 3); }

// Writes the BTH and the opcode's extension headers to `out` (room for
// opcode_info(...)->header_bytes) and returns the bytes written, or 0 if
// the opcode is not in the table.
size_t encode_headers(const RocePacket& pkt, uint8_t* out);

// Parses `len` bytes starting at a BTH and ending before the ICRC. False for
// an unknown opcode, TVer != 0, fewer bytes than the headers, PadCnt larger
// than what follows the headers, or bytes after the headers of an opcode
// that carries no payload.
bool decode(const uint8_t* bth, size_t len, RocePacket* out);

// PSN order on the 24-bit circle, as rxe psn_compare(): <0, 0, >0.
constexpr int psn_compare(uint32_t a, uint32_t b) { return static_cast<int32_t>((a - b) << 8); }
constexpr uint32_t psn_add(uint32_t psn, uint32_t n) { return (psn + n) & kMask24; }
// How far `psn` is past `from` on the circle (0 .. 2^24 - 1).
constexpr uint32_t psn_sub(uint32_t psn, uint32_t from) { return (psn - from) & kMask24; }

// AETH syndrome: bit 7 reserved, bits 6:5 the type, bits 4:0 its value.
enum class AethType : uint8_t { kAck = 0, kRnrNak = 1, kReserved = 2, kNak = 3 };
enum class NakCode : uint8_t {
  kPsnSequenceError = 0,
  kInvalidRequest = 1,
  kRemoteAccessError = 2,
  kRemoteOperationalError = 3,
  kInvalidRdRequest = 4,
};
inline constexpr uint8_t kCreditsInvalid = 31;  // "no credit information": what rxe always sends

constexpr uint8_t aeth_ack(uint8_t credit_code = kCreditsInvalid) { return credit_code & 0x1F; }
constexpr uint8_t aeth_rnr_nak(uint8_t timer_code) { return 0x20 | (timer_code & 0x1F); }
constexpr uint8_t aeth_nak(NakCode code) { return 0x60 | static_cast<uint8_t>(code); }
constexpr AethType aeth_type(uint8_t syndrome) { return static_cast<AethType>((syndrome >> 5) & 3); }
constexpr uint8_t aeth_value(uint8_t syndrome) { return syndrome & 0x1F; }

// Credits granted by ACK credit code 0-30; -1 for 31 (invalid/unlimited).
int aeth_credits(uint8_t credit_code);
// The RNR NAK timer code 0-31 in microseconds (IBTA RNR NAK timer
// encoding: code 0 is the longest, 655.36 ms; 1 is 0.01 ms; 31 is 491.52 ms).
uint32_t rnr_timer_usec(uint8_t timer_code);

}  // namespace sv::net
