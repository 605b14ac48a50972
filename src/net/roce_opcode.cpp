#include "roce_opcode.h"

#include <array>
#include <initializer_list>

namespace sv::net {
namespace {

// Offsets are computed from the header list, never written by hand: the
// layout is "BTH, then these headers in this order" and nothing else (a
// hand-written offset is how the rxe XRC patch came to count XRCETH twice).
constexpr OpcodeInfo op(uint8_t opcode, const char* name, uint32_t flags, std::initializer_list<Ext> exts = {}) {
  OpcodeInfo info{opcode, name, flags, 0, {}, {}, 0};
  size_t at = kBthBytes;
  for (Ext e : exts) {
    info.ext[info.ext_count++] = e;
    info.offset[static_cast<size_t>(e)] = static_cast<uint8_t>(at);
    at += ext_bytes(e);
  }
  info.header_bytes = static_cast<uint8_t>(at);
  return info;
}

using enum Ext;
constexpr uint32_t kReq = kRequest, kResp = kResponse, kData = kPayload;

constexpr OpcodeInfo kTable[] = {
    // Reliable Connection.
    op(0x00, "RC_SEND_FIRST", kReq | kData | kSend | kFirst),
    op(0x01, "RC_SEND_MIDDLE", kReq | kData | kSend | kMiddle),
    op(0x02, "RC_SEND_LAST", kReq | kData | kSend | kLast),
    op(0x03, "RC_SEND_LAST_WITH_IMMEDIATE", kReq | kData | kSend | kLast | kImm, {kImmDt}),
    op(0x04, "RC_SEND_ONLY", kReq | kData | kSend | kOnly),
    op(0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", kReq | kData | kSend | kOnly | kImm, {kImmDt}),
    op(0x06, "RC_RDMA_WRITE_FIRST", kReq | kData | kWrite | kFirst, {kReth}),
    op(0x07, "RC_RDMA_WRITE_MIDDLE", kReq | kData | kWrite | kMiddle),
    op(0x08, "RC_RDMA_WRITE_LAST", kReq | kData | kWrite | kLast),
    op(0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", kReq | kData | kWrite | kLast | kImm, {kImmDt}),
    op(0x0A, "RC_RDMA_WRITE_ONLY", kReq | kData | kWrite | kOnly, {kReth}),
    op(0x0B, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", kReq | kData | kWrite | kOnly | kImm, {kReth, kImmDt}),
    op(0x0C, "RC_RDMA_READ_REQUEST", kReq | kRead | kOnly, {kReth}),
    op(0x0D, "RC_RDMA_READ_RESPONSE_FIRST", kResp | kData | kRead | kFirst, {kAeth}),
    op(0x0E, "RC_RDMA_READ_RESPONSE_MIDDLE", kResp | kData | kRead | kMiddle),
    op(0x0F, "RC_RDMA_READ_RESPONSE_LAST", kResp | kData | kRead | kLast, {kAeth}),
    op(0x10, "RC_RDMA_READ_RESPONSE_ONLY", kResp | kData | kRead | kOnly, {kAeth}),
    op(0x11, "RC_ACKNOWLEDGE", kResp | kAckOp | kOnly, {kAeth}),
    op(0x12, "RC_ATOMIC_ACKNOWLEDGE", kResp | kAtomic | kOnly, {kAeth, kAtomicAckEth}),
    op(0x13, "RC_COMPARE_SWAP", kReq | kAtomic | kOnly, {kAtomicEth}),
    op(0x14, "RC_FETCH_ADD", kReq | kAtomic | kOnly, {kAtomicEth}),
    op(0x16, "RC_SEND_LAST_WITH_INVALIDATE", kReq | kData | kSend | kLast | kInv, {kIeth}),
    op(0x17, "RC_SEND_ONLY_WITH_INVALIDATE", kReq | kData | kSend | kOnly | kInv, {kIeth}),

    // Unreliable Connection: sends and writes only, no responses.
    op(0x20, "UC_SEND_FIRST", kReq | kData | kSend | kFirst),
    op(0x21, "UC_SEND_MIDDLE", kReq | kData | kSend | kMiddle),
    op(0x22, "UC_SEND_LAST", kReq | kData | kSend | kLast),
    op(0x23, "UC_SEND_LAST_WITH_IMMEDIATE", kReq | kData | kSend | kLast | kImm, {kImmDt}),
    op(0x24, "UC_SEND_ONLY", kReq | kData | kSend | kOnly),
    op(0x25, "UC_SEND_ONLY_WITH_IMMEDIATE", kReq | kData | kSend | kOnly | kImm, {kImmDt}),
    op(0x26, "UC_RDMA_WRITE_FIRST", kReq | kData | kWrite | kFirst, {kReth}),
    op(0x27, "UC_RDMA_WRITE_MIDDLE", kReq | kData | kWrite | kMiddle),
    op(0x28, "UC_RDMA_WRITE_LAST", kReq | kData | kWrite | kLast),
    op(0x29, "UC_RDMA_WRITE_LAST_WITH_IMMEDIATE", kReq | kData | kWrite | kLast | kImm, {kImmDt}),
    op(0x2A, "UC_RDMA_WRITE_ONLY", kReq | kData | kWrite | kOnly, {kReth}),
    op(0x2B, "UC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", kReq | kData | kWrite | kOnly | kImm, {kReth, kImmDt}),

    // Unreliable Datagram: single-packet sends, DETH first.
    op(0x64, "UD_SEND_ONLY", kReq | kData | kSend | kOnly, {kDeth}),
    op(0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", kReq | kData | kSend | kOnly | kImm, {kDeth, kImmDt}),

    // Extended Reliable Connection: requests name the target SRQ in an
    // XRCETH directly after the BTH; responses are laid out as in RC.
    op(0xA0, "XRC_SEND_FIRST", kReq | kData | kSend | kFirst, {kXrceth}),
    op(0xA1, "XRC_SEND_MIDDLE", kReq | kData | kSend | kMiddle, {kXrceth}),
    op(0xA2, "XRC_SEND_LAST", kReq | kData | kSend | kLast, {kXrceth}),
    op(0xA3, "XRC_SEND_LAST_WITH_IMMEDIATE", kReq | kData | kSend | kLast | kImm, {kXrceth, kImmDt}),
    op(0xA4, "XRC_SEND_ONLY", kReq | kData | kSend | kOnly, {kXrceth}),
    op(0xA5, "XRC_SEND_ONLY_WITH_IMMEDIATE", kReq | kData | kSend | kOnly | kImm, {kXrceth, kImmDt}),
    op(0xA6, "XRC_RDMA_WRITE_FIRST", kReq | kData | kWrite | kFirst, {kXrceth, kReth}),
    op(0xA7, "XRC_RDMA_WRITE_MIDDLE", kReq | kData | kWrite | kMiddle, {kXrceth}),
    op(0xA8, "XRC_RDMA_WRITE_LAST", kReq | kData | kWrite | kLast, {kXrceth}),
    op(0xA9, "XRC_RDMA_WRITE_LAST_WITH_IMMEDIATE", kReq | kData | kWrite | kLast | kImm, {kXrceth, kImmDt}),
    op(0xAA, "XRC_RDMA_WRITE_ONLY", kReq | kData | kWrite | kOnly, {kXrceth, kReth}),
    op(0xAB, "XRC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", kReq | kData | kWrite | kOnly | kImm, {kXrceth, kReth, kImmDt}),
    op(0xAC, "XRC_RDMA_READ_REQUEST", kReq | kRead | kOnly, {kXrceth, kReth}),
    op(0xAD, "XRC_RDMA_READ_RESPONSE_FIRST", kResp | kData | kRead | kFirst, {kAeth}),
    op(0xAE, "XRC_RDMA_READ_RESPONSE_MIDDLE", kResp | kData | kRead | kMiddle),
    op(0xAF, "XRC_RDMA_READ_RESPONSE_LAST", kResp | kData | kRead | kLast, {kAeth}),
    op(0xB0, "XRC_RDMA_READ_RESPONSE_ONLY", kResp | kData | kRead | kOnly, {kAeth}),
    op(0xB1, "XRC_ACKNOWLEDGE", kResp | kAckOp | kOnly, {kAeth}),
    op(0xB2, "XRC_ATOMIC_ACKNOWLEDGE", kResp | kAtomic | kOnly, {kAeth, kAtomicAckEth}),
    op(0xB3, "XRC_COMPARE_SWAP", kReq | kAtomic | kOnly, {kXrceth, kAtomicEth}),
    op(0xB4, "XRC_FETCH_ADD", kReq | kAtomic | kOnly, {kXrceth, kAtomicEth}),
    op(0xB6, "XRC_SEND_LAST_WITH_INVALIDATE", kReq | kData | kSend | kLast | kInv, {kXrceth, kIeth}),
    op(0xB7, "XRC_SEND_ONLY_WITH_INVALIDATE", kReq | kData | kSend | kOnly | kInv, {kXrceth, kIeth}),
};

// opcode -> index into kTable, -1 for unknown opcodes.
constexpr std::array<int8_t, 256> kIndex = [] {
  std::array<int8_t, 256> index{};
  index.fill(-1);
  for (size_t i = 0; i < std::size(kTable); ++i) index[kTable[i].opcode] = static_cast<int8_t>(i);
  return index;
}();

constexpr const OpcodeInfo& at(uint8_t opcode) { return kTable[kIndex[opcode]]; }

// The layouts wire.md spells out, checked at compile time.
static_assert(std::size(kTable) == 23 + 12 + 2 + 23);
static_assert([] {
  for (size_t i = 1; i < std::size(kTable); ++i)
    if (kTable[i - 1].opcode >= kTable[i].opcode) return false;
  return true;
}(), "kTable must be sorted by opcode, without duplicates");
static_assert(at(0x0B).offset_of(kReth) == 12 && at(0x0B).offset_of(kImmDt) == 28 && at(0x0B).header_bytes == 32);
static_assert(at(0x12).offset_of(kAeth) == 12 && at(0x12).offset_of(kAtomicAckEth) == 16 &&
              at(0x12).header_bytes == 24);
static_assert(at(0x65).offset_of(kDeth) == 12 && at(0x65).offset_of(kImmDt) == 20 && at(0x65).header_bytes == 24);
static_assert(at(0xB3).offset_of(kXrceth) == 12 && at(0xB3).offset_of(kAtomicEth) == 16 &&
              at(0xB3).header_bytes == 44);
static_assert(at(0xAB).header_bytes == 12 + 4 + 16 + 4 && !at(0xB1).has(kXrceth));

}  // namespace

const OpcodeInfo* opcode_info(uint8_t opcode) {
  int8_t i = kIndex[opcode];
  return i < 0 ? nullptr : &kTable[i];
}

std::span<const OpcodeInfo> opcode_table() { return kTable; }

}  // namespace sv::net
