#include "roce_header.h"

namespace sv::net {
namespace {

using namespace be;

// Field positions inside each header (IBTA vol 1, 9.2-9.3). The static
// asserts tie each layout to the header size the opcode table adds up.
namespace bth {
constexpr size_t kOpcode = 0, kFlags = 1, kPkey = 2, kCongestion = 4, kDestQp = 5, kAckReq = 8, kPsn = 9;
constexpr uint8_t kSe = 0x80, kMig = 0x40, kPadShift = 4, kPadMask = 0x30, kTverMask = 0x0F;
constexpr uint8_t kFecn = 0x80, kBecn = 0x40, kAck = 0x80;
static_assert(kPsn + 3 == kBthBytes);
}  // namespace bth
namespace reth {
constexpr size_t kVa = 0, kRkey = 8, kLen = 12;
static_assert(kLen + 4 == kRethBytes);
}  // namespace reth
namespace aeth {
constexpr size_t kSyndrome = 0, kMsn = 1;
static_assert(kMsn + 3 == kAethBytes);
}  // namespace aeth
namespace atomic_eth {
constexpr size_t kVa = 0, kRkey = 8, kSwapAdd = 12, kCompare = 20;
static_assert(kCompare + 8 == kAtomicEthBytes);  // packed: the 64-bit fields are not 8-aligned
}  // namespace atomic_eth
namespace deth {
constexpr size_t kQkey = 0, kSrcQp = 5;  // byte 4 reserved
static_assert(kSrcQp + 3 == kDethBytes);
}  // namespace deth
namespace xrceth {
constexpr size_t kSrqn = 1;  // byte 0 reserved
static_assert(kSrqn + 3 == kXrcethBytes);
}  // namespace xrceth
static_assert(kAtomicAckEthBytes == 8 && kImmDtBytes == 4 && kIethBytes == 4);

void encode_bth(const Bth& b, uint8_t* p) {
  p[bth::kOpcode] = b.opcode;
  p[bth::kFlags] = static_cast<uint8_t>((b.se ? bth::kSe : 0) | (b.mig ? bth::kMig : 0) |
                                        ((b.pad << bth::kPadShift) & bth::kPadMask) | (b.tver & bth::kTverMask));
  put16(p + bth::kPkey, b.pkey);
  p[bth::kCongestion] = static_cast<uint8_t>((b.fecn ? bth::kFecn : 0) | (b.becn ? bth::kBecn : 0));
  put24(p + bth::kDestQp, b.dest_qp);
  p[bth::kAckReq] = b.ack_req ? bth::kAck : 0;
  put24(p + bth::kPsn, b.psn);
}

Bth decode_bth(const uint8_t* p) {
  Bth b;
  b.opcode = p[bth::kOpcode];
  b.se = p[bth::kFlags] & bth::kSe;
  b.mig = p[bth::kFlags] & bth::kMig;
  b.pad = (p[bth::kFlags] & bth::kPadMask) >> bth::kPadShift;
  b.tver = p[bth::kFlags] & bth::kTverMask;
  b.pkey = get16(p + bth::kPkey);
  b.fecn = p[bth::kCongestion] & bth::kFecn;
  b.becn = p[bth::kCongestion] & bth::kBecn;
  b.dest_qp = get24(p + bth::kDestQp);
  b.ack_req = p[bth::kAckReq] & bth::kAck;
  b.psn = get24(p + bth::kPsn);
  return b;
}

void encode_ext(const RocePacket& pkt, Ext e, uint8_t* p) {
  switch (e) {
    case Ext::kXrceth:
      p[0] = 0;
      put24(p + xrceth::kSrqn, pkt.xrceth.srqn);
      break;
    case Ext::kReth:
      put64(p + reth::kVa, pkt.reth.va);
      put32(p + reth::kRkey, pkt.reth.rkey);
      put32(p + reth::kLen, pkt.reth.len);
      break;
    case Ext::kAeth:
      p[aeth::kSyndrome] = pkt.aeth.syndrome;
      put24(p + aeth::kMsn, pkt.aeth.msn);
      break;
    case Ext::kAtomicEth:
      put64(p + atomic_eth::kVa, pkt.atomic_eth.va);
      put32(p + atomic_eth::kRkey, pkt.atomic_eth.rkey);
      put64(p + atomic_eth::kSwapAdd, pkt.atomic_eth.swap_add);
      put64(p + atomic_eth::kCompare, pkt.atomic_eth.compare);
      break;
    case Ext::kAtomicAckEth:
      put64(p, pkt.atomic_ack);
      break;
    case Ext::kImmDt:
      put32(p, pkt.imm);
      break;
    case Ext::kIeth:
      put32(p, pkt.ieth);
      break;
    case Ext::kDeth:
      put32(p + deth::kQkey, pkt.deth.qkey);
      p[deth::kQkey + 4] = 0;
      put24(p + deth::kSrcQp, pkt.deth.src_qp);
      break;
  }
}

void decode_ext(const uint8_t* p, Ext e, RocePacket* pkt) {
  switch (e) {
    case Ext::kXrceth:
      pkt->xrceth.srqn = get24(p + xrceth::kSrqn);
      break;
    case Ext::kReth:
      pkt->reth = {get64(p + reth::kVa), get32(p + reth::kRkey), get32(p + reth::kLen)};
      break;
    case Ext::kAeth:
      pkt->aeth = {p[aeth::kSyndrome], get24(p + aeth::kMsn)};
      break;
    case Ext::kAtomicEth:
      pkt->atomic_eth = {get64(p + atomic_eth::kVa), get32(p + atomic_eth::kRkey),
                         get64(p + atomic_eth::kSwapAdd), get64(p + atomic_eth::kCompare)};
      break;
    case Ext::kAtomicAckEth:
      pkt->atomic_ack = get64(p);
      break;
    case Ext::kImmDt:
      pkt->imm = get32(p);
      break;
    case Ext::kIeth:
      pkt->ieth = get32(p);
      break;
    case Ext::kDeth:
      pkt->deth = {get32(p + deth::kQkey), get24(p + deth::kSrcQp)};
      break;
  }
}

}  // namespace

size_t encode_headers(const RocePacket& pkt, uint8_t* out) {
  const OpcodeInfo* info = opcode_info(pkt.bth.opcode);
  if (!info) return 0;
  encode_bth(pkt.bth, out);
  for (size_t i = 0; i < info->ext_count; ++i) encode_ext(pkt, info->ext[i], out + info->offset_of(info->ext[i]));
  return info->header_bytes;
}

bool decode(const uint8_t* bth, size_t len, RocePacket* out) {
  if (len < kBthBytes) return false;
  const OpcodeInfo* info = opcode_info(bth[bth::kOpcode]);
  if (!info || len < info->header_bytes) return false;
  // (Into *out, not a copy of a local: a packet's worth of copying less
  // per packet. On failure *out holds parts of a packet.)
  RocePacket& pkt = *out;
  pkt.bth = decode_bth(bth);
  // The headers this opcode lacks read as zero. Member by member: the
  // compiler made `pkt = RocePacket{}` a rep stos, 40% of decode at
  // 1 KiB packets.
  pkt.xrceth = {};
  pkt.deth = {};
  pkt.reth = {};
  pkt.aeth = {};
  pkt.atomic_eth = {};
  pkt.atomic_ack = 0;
  pkt.imm = 0;
  pkt.ieth = 0;
  static_assert(sizeof(RocePacket) == 128, "a member added to RocePacket: zero it above too");
  if (pkt.bth.tver != 0) return false;
  size_t after_headers = len - info->header_bytes;
  if (pkt.bth.pad > after_headers) return false;
  if (!info->is(kPayload) && after_headers != 0) return false;
  for (size_t i = 0; i < info->ext_count; ++i) decode_ext(bth + info->offset_of(info->ext[i]), info->ext[i], &pkt);
  pkt.payload = bth + info->header_bytes;
  pkt.payload_len = after_headers - pkt.bth.pad;
  return true;
}

int aeth_credits(uint8_t credit_code) {
  // IBTA AETH credit count encoding (rdmavt rc.c credit_table): steps of
  // about 1.5x, so 5 bits reach 32768.
  static constexpr int kCredits[31] = {0,   1,   2,   3,    4,    6,    8,    12,   16,    24,    32,
                                       48,  64,  96,  128,  192,  256,  384,  512,  768,   1024,  1536,
                                       2048, 3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768};
  credit_code &= 0x1F;
  return credit_code < 31 ? kCredits[credit_code] : -1;
}

uint32_t rnr_timer_usec(uint8_t timer_code) {
  // rxe_comp.c rnrnak_usec[], except code 25: rxe has 61410 there, the
  // spec 61.44 ms, which we use.
  static constexpr uint32_t kUsec[32] = {655360, 10,    20,    30,    40,     60,     80,     120,
                                         160,    240,   320,   480,   640,    960,    1280,   1920,
                                         2560,   3840,  5120,  7680,  10240,  15360,  20480,  30720,
                                         40960,  61440, 81920, 122880, 163840, 245760, 327680, 491520};
  return kUsec[timer_code & 0x1F];
}

}  // namespace sv::net
