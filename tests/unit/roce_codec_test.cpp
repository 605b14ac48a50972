// The RoCEv2 wire codec (src/net): opcode table, header encode/decode, PSN
// order, AETH syndromes, UDP source ports, ICRC, whole frames, pcap files.
// The ICRC is checked against a bit-by-bit CRC-32 over a masked copy made
// here, so the test shares neither the masking nor zlib with the library.
#include <arpa/inet.h>
#include <cpuid.h>
#include <gtest/gtest.h>
#include <isa-l/crc.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "net/icrc.h"
#include "net/pcap_writer.h"
#include "net/roce_frame.h"
#include "net/roce_header.h"
#include "net/roce_opcode.h"
#include "net/udp_sport.h"

namespace sv::net {
namespace {

// ---------------------------------------------------------------- opcodes

std::vector<Ext> exts_of(const OpcodeInfo& info) { return {info.ext, info.ext + info.ext_count}; }

TEST(RoceOpcode, TableCoversRcUcUdXrc) {
  std::vector<uint8_t> want;
  for (int op = 0x00; op <= 0x14; ++op) want.push_back(static_cast<uint8_t>(op));
  want.insert(want.end(), {0x16, 0x17});
  for (int op = 0x20; op <= 0x2B; ++op) want.push_back(static_cast<uint8_t>(op));
  want.insert(want.end(), {0x64, 0x65});
  for (int op = 0xA0; op <= 0xB4; ++op) want.push_back(static_cast<uint8_t>(op));
  want.insert(want.end(), {0xB6, 0xB7});
  std::vector<uint8_t> got;
  for (const OpcodeInfo& info : opcode_table()) got.push_back(info.opcode);
  EXPECT_EQ(got, want);
  for (int op = 0; op < 256; ++op) {
    bool known = std::find(want.begin(), want.end(), op) != want.end();
    const OpcodeInfo* info = opcode_info(static_cast<uint8_t>(op));
    EXPECT_EQ(info != nullptr, known) << "opcode 0x" << std::hex << op;
    if (info) {
      EXPECT_EQ(info->opcode, op);
    }
  }
}

TEST(RoceOpcode, EveryEntryIsConsistent) {
  for (const OpcodeInfo& info : opcode_table()) {
    SCOPED_TRACE(info.name);
    std::string prefix = info.transport() == kTransportRc    ? "RC_"
                         : info.transport() == kTransportUc  ? "UC_"
                         : info.transport() == kTransportUd  ? "UD_"
                         : info.transport() == kTransportXrc ? "XRC_"
                                                             : "?";
    EXPECT_EQ(std::string(info.name).rfind(prefix, 0), 0u);
    EXPECT_NE(info.is(kRequest), info.is(kResponse));
    int positions = info.is(kFirst) + info.is(kMiddle) + info.is(kLast) + info.is(kOnly);
    EXPECT_EQ(positions, 1);
    // Offsets follow the header list with nothing in between.
    size_t at = kBthBytes;
    for (size_t i = 0; i < kExtCount; ++i) {
      Ext e = static_cast<Ext>(i);
      auto exts = exts_of(info);
      EXPECT_EQ(info.has(e), std::find(exts.begin(), exts.end(), e) != exts.end());
    }
    for (Ext e : exts_of(info)) {
      EXPECT_EQ(info.offset_of(e), at);
      at += ext_bytes(e);
    }
    EXPECT_EQ(info.header_bytes, at);
    // XRC requests name the SRQ first; nobody else carries an XRCETH.
    bool xrc_request = info.transport() == kTransportXrc && info.is(kRequest);
    EXPECT_EQ(info.has(Ext::kXrceth), xrc_request);
    if (xrc_request) {
      EXPECT_EQ(info.ext[0], Ext::kXrceth);
    }
    EXPECT_EQ(info.has(Ext::kImmDt), info.is(kImm));
    EXPECT_EQ(info.has(Ext::kIeth), info.is(kInv));
    EXPECT_EQ(info.has(Ext::kDeth), info.transport() == kTransportUd);
    // The XRC twin of every RC opcode has the same shape after the XRCETH.
    if (info.transport() == kTransportRc) {
      const OpcodeInfo* xrc = opcode_info(info.opcode | kTransportXrc);
      ASSERT_NE(xrc, nullptr);
      auto rc_exts = exts_of(info), xrc_exts = exts_of(*xrc);
      if (xrc->is(kRequest)) xrc_exts.erase(xrc_exts.begin());
      EXPECT_EQ(xrc_exts, rc_exts);
      EXPECT_EQ(xrc->flags, info.flags);
    }
  }
}

TEST(RoceOpcode, LayoutsFromTheSpec) {
  using enum Ext;
  EXPECT_EQ(exts_of(*opcode_info(0x04)), std::vector<Ext>{});
  EXPECT_EQ(exts_of(*opcode_info(0x0B)), (std::vector<Ext>{kReth, kImmDt}));  // WRITE_ONLY_IMM
  EXPECT_EQ(exts_of(*opcode_info(0x09)), std::vector<Ext>{kImmDt});           // WRITE_LAST_IMM
  EXPECT_EQ(exts_of(*opcode_info(0x07)), std::vector<Ext>{});                 // WRITE_MIDDLE
  EXPECT_EQ(exts_of(*opcode_info(0x0E)), std::vector<Ext>{});                 // READ_RESPONSE_MIDDLE
  EXPECT_EQ(exts_of(*opcode_info(0x0F)), std::vector<Ext>{kAeth});
  EXPECT_EQ(exts_of(*opcode_info(0x12)), (std::vector<Ext>{kAeth, kAtomicAckEth}));
  EXPECT_EQ(exts_of(*opcode_info(0x14)), std::vector<Ext>{kAtomicEth});
  EXPECT_EQ(exts_of(*opcode_info(0x17)), std::vector<Ext>{kIeth});
  EXPECT_EQ(exts_of(*opcode_info(0x65)), (std::vector<Ext>{kDeth, kImmDt}));
  EXPECT_EQ(exts_of(*opcode_info(0xAB)), (std::vector<Ext>{kXrceth, kReth, kImmDt}));
  EXPECT_EQ(exts_of(*opcode_info(0xB3)), (std::vector<Ext>{kXrceth, kAtomicEth}));
  EXPECT_EQ(exts_of(*opcode_info(0xB1)), std::vector<Ext>{kAeth});
  EXPECT_EQ(opcode_info(0xB3)->offset_of(kAtomicEth), 16u);  // XRCETH counted once
  EXPECT_EQ(opcode_info(0xB3)->header_bytes, 44u);
  EXPECT_FALSE(opcode_info(0x0C)->is(kPayload));  // READ_REQUEST
  EXPECT_FALSE(opcode_info(0x11)->is(kPayload));
  EXPECT_TRUE(opcode_info(0x10)->is(kPayload));
  EXPECT_STREQ(opcode_info(0x00)->name, "RC_SEND_FIRST");
  EXPECT_STREQ(opcode_info(0x65)->name, "UD_SEND_ONLY_WITH_IMMEDIATE");
  EXPECT_TRUE(opcode_info(0x0D)->starts_message() && !opcode_info(0x0D)->ends_message());
  EXPECT_TRUE(opcode_info(0x24)->starts_message() && opcode_info(0x24)->ends_message());
}

// ---------------------------------------------------------------- headers

// A packet of opcode `info` whose every field holds a value that differs
// between fields and between opcodes (i: the entry's index), with the
// widest bits of each field set to catch truncation.
RocePacket distinctive(const OpcodeInfo& info, uint32_t i) {
  RocePacket p;
  p.bth = {info.opcode, (i & 1) != 0, (i & 2) != 0, 0, 0, static_cast<uint16_t>(0x8000 | i), (i & 4) != 0,
           (i & 8) != 0, 0xA00000 | i << 8 | info.opcode, (i & 16) == 0, 0xF00000 | i << 4};
  p.xrceth.srqn = 0xC10000 | i;
  p.deth = {0x80010000 | i, 0xD00000 | i};
  p.reth = {0x8877665544332211ull ^ i, 0xFEDC0000 | i, 0x80000000 | i};
  p.aeth = {static_cast<uint8_t>(0x60 | (i & 3)), 0xE00000 | i};
  p.atomic_eth = {0x0102030405060708ull + i, 0xCAFE0000 | i, 0xF1F2F3F4F5F6F7F8ull - i, 0x8182838485868788ull ^ i};
  p.atomic_ack = 0x9192939495969798ull + i;
  p.imm = 0xB0B00000 | i;
  p.ieth = 0x1E7E0000 | i;
  return p;
}

void expect_same_headers(const OpcodeInfo& info, const RocePacket& want, const RocePacket& got) {
  using enum Ext;
  RocePacket none;
  EXPECT_EQ(got.bth, want.bth);
  EXPECT_EQ(got.xrceth, info.has(kXrceth) ? want.xrceth : none.xrceth);
  EXPECT_EQ(got.deth, info.has(kDeth) ? want.deth : none.deth);
  EXPECT_EQ(got.reth, info.has(kReth) ? want.reth : none.reth);
  EXPECT_EQ(got.aeth, info.has(kAeth) ? want.aeth : none.aeth);
  EXPECT_EQ(got.atomic_eth, info.has(kAtomicEth) ? want.atomic_eth : none.atomic_eth);
  EXPECT_EQ(got.atomic_ack, info.has(kAtomicAckEth) ? want.atomic_ack : none.atomic_ack);
  EXPECT_EQ(got.imm, info.has(kImmDt) ? want.imm : none.imm);
  EXPECT_EQ(got.ieth, info.has(kIeth) ? want.ieth : none.ieth);
}

TEST(RoceHeader, EveryOpcodeRoundTripsWithPad) {
  uint32_t i = 0;
  for (const OpcodeInfo& info : opcode_table()) {
    ++i;
    size_t max_payload = info.is(kPayload) ? 9 : 0;
    for (size_t len = 0; len <= max_payload; ++len) {
      SCOPED_TRACE(std::string(info.name) + " payload " + std::to_string(len));
      RocePacket want = distinctive(info, i);
      want.bth.pad = pad_for(len);
      std::vector<uint8_t> buf(info.header_bytes + len + want.bth.pad, 0xEE);
      ASSERT_EQ(encode_headers(want, buf.data()), info.header_bytes);
      for (size_t k = 0; k < len; ++k) buf[info.header_bytes + k] = static_cast<uint8_t>(0x30 + k);
      EXPECT_EQ(buf.size() % 4, 0u);
      RocePacket got;
      ASSERT_TRUE(decode(buf.data(), buf.size(), &got));
      expect_same_headers(info, want, got);
      EXPECT_EQ(got.payload, buf.data() + info.header_bytes);
      ASSERT_EQ(got.payload_len, len);
      for (size_t k = 0; k < len; ++k) EXPECT_EQ(got.payload[k], 0x30 + k);
    }
  }
}

TEST(RoceHeader, BigEndianBytes) {
  // XRC RDMA_WRITE_ONLY_WITH_IMMEDIATE: every byte position written out.
  RocePacket p;
  p.bth = {0xAB, true, false, 3, 0, 0x1234, true, true, 0x56789A, true, 0xBCDEF0};
  p.xrceth.srqn = 0x0A0B0C;
  p.reth = {0x1122334455667788, 0x99AABBCC, 0xDDEEFF00};
  p.imm = 0x01020304;
  uint8_t out[36];
  ASSERT_EQ(encode_headers(p, out), 36u);
  const uint8_t want[36] = {0xAB, 0xB0, 0x12, 0x34, 0xC0, 0x56, 0x78, 0x9A, 0x80, 0xBC, 0xDE, 0xF0,  // BTH
                            0x00, 0x0A, 0x0B, 0x0C,                                                  // XRCETH
                            0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC,  // RETH
                            0xDD, 0xEE, 0xFF, 0x00,                                                  //
                            0x01, 0x02, 0x03, 0x04};                                                 // ImmDt
  EXPECT_EQ(std::vector<uint8_t>(out, out + 36), std::vector<uint8_t>(want, want + 36));

  // UD SEND_ONLY: DETH with its reserved byte; AtomicETH packed.
  RocePacket ud;
  ud.bth.opcode = 0x64;
  ud.deth = {kGsiQkey, 0x000001};
  uint8_t d[20];
  ASSERT_EQ(encode_headers(ud, d), 20u);
  EXPECT_EQ(std::vector<uint8_t>(d + 12, d + 20), (std::vector<uint8_t>{0x80, 0x01, 0, 0, 0, 0, 0, 1}));
  RocePacket at;
  at.bth.opcode = 0x13;
  at.atomic_eth = {0x0102030405060708, 0x090A0B0C, 0x1112131415161718, 0x2122232425262728};
  uint8_t a[40];
  ASSERT_EQ(encode_headers(at, a), 40u);
  EXPECT_EQ(a[12], 0x01);
  EXPECT_EQ(a[20], 0x09);
  EXPECT_EQ(a[24], 0x11);
  EXPECT_EQ(a[32], 0x21);
  EXPECT_EQ(a[39], 0x28);
}

TEST(RoceHeader, NarrowFieldsAreMasked) {
  RocePacket p;
  p.bth = {0x65, false, false, 7, 0, 0xFFFF, false, false, 0xFF123456, false, 0x87654321};
  p.deth = {0xFFFFFFFF, 0xAB000001};
  uint8_t buf[24 + 4] = {};  // PadCnt is 2 bits: 7 must not spill into MigReq
  ASSERT_EQ(encode_headers(p, buf), 24u);
  RocePacket got;
  ASSERT_TRUE(decode(buf, sizeof buf, &got));
  EXPECT_EQ(got.bth.dest_qp, 0x123456u);
  EXPECT_EQ(got.bth.psn, 0x654321u);
  EXPECT_EQ(got.deth.src_qp, 0x000001u);
  EXPECT_FALSE(got.bth.mig);
  EXPECT_EQ(got.bth.pad, 3);
  EXPECT_EQ(got.payload_len, 1u);

  RocePacket ack;
  ack.bth.opcode = 0x11;
  ack.aeth = {aeth_ack(), 0x1ABCDEF};
  ASSERT_EQ(encode_headers(ack, buf), 16u);
  ASSERT_TRUE(decode(buf, 16, &got));
  EXPECT_EQ(got.aeth.msn, 0xABCDEFu);
}

TEST(RoceHeader, DecodeRejectsMalformed) {
  RocePacket p = distinctive(*opcode_info(0x0A), 1);  // RC_RDMA_WRITE_ONLY: BTH + RETH
  p.bth.pad = 2;
  uint8_t buf[28 + 4] = {};
  ASSERT_EQ(encode_headers(p, buf), 28u);
  RocePacket got;
  EXPECT_TRUE(decode(buf, 32, &got));
  EXPECT_EQ(got.payload_len, 2u);
  EXPECT_TRUE(decode(buf, 30, &got));  // pad only, empty payload
  EXPECT_FALSE(decode(buf, 29, &got));  // pad larger than what follows the headers
  EXPECT_FALSE(decode(buf, 27, &got));  // RETH cut short
  EXPECT_FALSE(decode(buf, 11, &got));  // BTH cut short
  EXPECT_FALSE(decode(buf, 0, &got));
  uint8_t tver = buf[1];
  buf[1] = static_cast<uint8_t>(tver | 0x01);
  EXPECT_FALSE(decode(buf, 32, &got));  // TVer 1
  buf[1] = tver;
  for (uint8_t unknown : {0x15, 0x18, 0x1C, 0x2C, 0x40, 0x60, 0x63, 0x66, 0x81, 0xB5, 0xE0, 0xFF}) {
    buf[0] = unknown;
    EXPECT_FALSE(decode(buf, 32, &got)) << int{unknown};
  }

  // Opcodes without payload take no bytes after their headers.
  RocePacket read = distinctive(*opcode_info(0x0C), 2);
  uint8_t r[32] = {};
  ASSERT_EQ(encode_headers(read, r), 28u);
  EXPECT_TRUE(decode(r, 28, &got));
  EXPECT_FALSE(decode(r, 32, &got));
  RocePacket unknown;
  unknown.bth.opcode = 0x1F;
  EXPECT_EQ(encode_headers(unknown, r), 0u);
}

TEST(RocePsn, CompareAcrossTheWrap) {
  EXPECT_EQ(psn_compare(5, 5), 0);
  EXPECT_LT(psn_compare(4, 5), 0);
  EXPECT_GT(psn_compare(5, 4), 0);
  EXPECT_GT(psn_compare(0, 0xFFFFFF), 0);  // 0 follows 0xffffff
  EXPECT_LT(psn_compare(0xFFFFFF, 0), 0);
  EXPECT_GT(psn_compare(0x000010, 0xFFFFF0), 0);
  EXPECT_GT(psn_compare(0x7FFFFF, 0), 0);  // up to half the circle ahead
  EXPECT_LT(psn_compare(0x800001, 0), 0);  // further is behind
  EXPECT_EQ(psn_compare(0x1000005, 5), 0);  // bits above 24 do not count
  EXPECT_EQ(psn_add(0xFFFFFE, 3), 1u);
}

TEST(RoceAeth, Syndromes) {
  EXPECT_EQ(aeth_ack(), 0x1F);  // what rxe sends
  EXPECT_EQ(aeth_rnr_nak(14), 46);  // wire.md: syndrome=46, timer=14
  EXPECT_EQ(aeth_nak(NakCode::kPsnSequenceError), 0x60);
  EXPECT_EQ(aeth_nak(NakCode::kRemoteOperationalError), 0x63);
  EXPECT_EQ(aeth_type(aeth_ack(5)), AethType::kAck);
  EXPECT_EQ(aeth_type(aeth_rnr_nak(31)), AethType::kRnrNak);
  EXPECT_EQ(aeth_type(aeth_nak(NakCode::kRemoteAccessError)), AethType::kNak);
  EXPECT_EQ(aeth_value(aeth_nak(NakCode::kRemoteAccessError)), 2);
  EXPECT_EQ(aeth_value(aeth_rnr_nak(14)), 14);
  EXPECT_EQ(aeth_credits(0), 0);
  EXPECT_EQ(aeth_credits(5), 6);
  EXPECT_EQ(aeth_credits(30), 32768);
  EXPECT_EQ(aeth_credits(kCreditsInvalid), -1);
}

TEST(RoceAeth, RnrTimerTable) {
  EXPECT_EQ(rnr_timer_usec(0), 655360u);
  EXPECT_EQ(rnr_timer_usec(1), 10u);
  EXPECT_EQ(rnr_timer_usec(14), 1280u);
  EXPECT_EQ(rnr_timer_usec(25), 61440u);
  EXPECT_EQ(rnr_timer_usec(31), 491520u);
  for (uint8_t t = 2; t < 32; ++t) EXPECT_GT(rnr_timer_usec(t), rnr_timer_usec(t - 1)) << int{t};
}

// ---------------------------------------------------------------- UDP ports

TEST(RoceSport, MatchesLinux) {
  EXPECT_EQ(rc_udp_sport(0, 0x11, 0x11), 0xC121);  // observed from rxe
  EXPECT_EQ(ud_udp_sport(0x12), 0xF806);           // observed from rxe
  EXPECT_EQ(rdma_calc_flow_label(0x11, 0x11), 0x121u);
  // A given flow label wins over the QPNs; its top 6 bits fold into the low 14.
  EXPECT_EQ(rc_udp_sport(0x12345, 0x11, 0x11), 0xC000 | (0x2345 ^ 0x4));
  EXPECT_EQ(rdma_flow_label_to_udp_sport(0xFFFFF), 0xC000 | (0x3FFF ^ 0x3F));
  // v = 0xfffffe000001: both folds matter.
  uint64_t v = 0xFFFFFFull * 0xFFFFFFull;
  v ^= v >> 20;
  v ^= v >> 40;
  EXPECT_EQ(rdma_calc_flow_label(0xFFFFFF, 0xFFFFFF), v & 0xFFFFF);
  EXPECT_EQ(hash_32(1, 14), 0x61C88647u >> 18);
  for (uint32_t q = 0; q < 5000; q += 7) {
    EXPECT_GE(rc_udp_sport(0, q, q + 1), 0xC000);
    EXPECT_GE(ud_udp_sport(q), 0xC000);
  }
}

// ---------------------------------------------------------------- ICRC

// Bit-by-bit reflected CRC-32 (polynomial 0xEDB88320), initial ~0, final ~.
uint32_t crc32_bitwise(const std::vector<uint8_t>& data) {
  uint32_t crc = 0xFFFFFFFF;
  for (uint8_t byte : data) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc & 1) ? (crc >> 1) ^ 0xEDB88320u : crc >> 1;
  }
  return ~crc;
}

// Which bytes of an IP/UDP/BTH packet the ICRC replaces by ones (wire.md),
// as a mask per byte; the test's own reading of the rules.
std::vector<uint8_t> icrc_mask(const std::vector<uint8_t>& ip_packet) {
  std::vector<uint8_t> mask(ip_packet.size(), 0);
  size_t ip_len;
  if (ip_packet[0] >> 4 == 4) {
    ip_len = 20;
    mask[1] = mask[8] = mask[10] = mask[11] = 0xFF;  // TOS, TTL, checksum
  } else {
    ip_len = 40;
    mask[0] = 0x0F;  // traffic class, flow label, hop limit
    mask[1] = mask[2] = mask[3] = mask[7] = 0xFF;
  }
  mask[ip_len + 6] = mask[ip_len + 7] = 0xFF;  // UDP checksum
  mask[ip_len + 8 + 4] = 0xFF;                 // BTH FECN, BECN, resv6
  return mask;
}

uint32_t reference_icrc(const std::vector<uint8_t>& ip_packet) {
  std::vector<uint8_t> data(8, 0xFF);
  std::vector<uint8_t> mask = icrc_mask(ip_packet);
  for (size_t i = 0; i < ip_packet.size(); ++i) data.push_back(ip_packet[i] | mask[i]);
  return crc32_bitwise(data);
}

// An IP packet without its ICRC, written byte by byte here: IPv4 or IPv6,
// UDP, BTH (RC SEND_ONLY_WITH_IMMEDIATE), ImmDt, 7 bytes payload, 1 pad.
std::vector<uint8_t> handmade_packet(bool ipv6) {
  std::vector<uint8_t> udp_and_up = {
      0xC1, 0x21, 0x12, 0xB7, 0x00, 0x24, 0xAB, 0xCD,                          // UDP 49441 -> 4791, len 36
      0x05, 0x90, 0xFF, 0xFF, 0x40, 0x00, 0x00, 0x11, 0x80, 0x12, 0x34, 0x56,  // BTH, pad 1, BECN
      0xDE, 0xAD, 0xBE, 0xEF,                                                  // ImmDt
      'p',  'a',  'y',  'l',  'o',  'a',  'd',  0x00};                         // payload + pad
  std::vector<uint8_t> ip;
  if (!ipv6) {
    ip = {0x45, 0x68, 0x00, 0x38, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0x5A, 0x5A,
          10,   0,    0,    1,    10,   0,    0,    2};
  } else {
    ip = {0x62, 0x81, 0x23, 0x45, 0x00, 0x24, 0x11, 0x40};
    for (int i = 0; i < 2; ++i) {
      std::vector<uint8_t> addr = {0xFD, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, static_cast<uint8_t>(1 + i)};
      ip.insert(ip.end(), addr.begin(), addr.end());
    }
  }
  ip.insert(ip.end(), udp_and_up.begin(), udp_and_up.end());
  return ip;
}

TEST(RoceIcrc, MatchesBitwiseCrcOverMaskedCopy) {
  for (bool ipv6 : {false, true}) {
    std::vector<uint8_t> pkt = handmade_packet(ipv6);
    EXPECT_EQ(icrc(pkt.data(), pkt.size()), reference_icrc(pkt)) << "ipv6=" << ipv6;
  }
  // And over frames built by the library, where the ICRC is on the wire.
  FrameAddrs a;
  a.src_ip = v4_mapped(htonl(0xC0A80001));
  a.dst_ip = v4_mapped(htonl(0xC0A80002));
  RocePacket p;
  p.bth.opcode = 0x04;
  std::vector<uint8_t> payload(1000);
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7);
  for (size_t len : {size_t{0}, size_t{1}, size_t{13}, size_t{1000}}) {
    std::vector<uint8_t> f = build_frame(a, p, payload.data(), len);
    ASSERT_FALSE(f.empty());
    std::vector<uint8_t> ip(f.begin() + kEthHeaderBytes, f.end() - 4);
    uint32_t wire = f[f.size() - 4] | f[f.size() - 3] << 8 | f[f.size() - 2] << 16 | uint32_t{f[f.size() - 1]} << 24;
    EXPECT_EQ(wire, reference_icrc(ip)) << len;
  }
}

TEST(RoceIcrc, CoversEveryByteButTheMaskedOnes) {
  for (bool ipv6 : {false, true}) {
    std::vector<uint8_t> pkt = handmade_packet(ipv6);
    std::vector<uint8_t> mask = icrc_mask(pkt);
    uint32_t base = icrc(pkt.data(), pkt.size());
    for (size_t i = 0; i < pkt.size(); ++i) {
      std::vector<uint8_t> changed = pkt;
      changed[i] ^= 0xFF;
      if (mask[i] == 0xFF) {
        EXPECT_EQ(icrc(changed.data(), changed.size()), base) << "masked byte " << i << " ipv6=" << ipv6;
      } else {
        EXPECT_NE(icrc(changed.data(), changed.size()), base) << "byte " << i << " ipv6=" << ipv6;
      }
      if (mask[i] != 0 && mask[i] != 0xFF) {  // IPv6 byte 0: traffic class half vs version half
        changed = pkt;
        changed[i] ^= mask[i];
        EXPECT_EQ(icrc(changed.data(), changed.size()), base) << "masked bits of byte " << i;
      }
    }
  }
  // The named variant fields, one by one (IPv4: TTL at 8; UDP checksum at
  // 26; FECN in BTH byte 4 at 32).
  std::vector<uint8_t> pkt = handmade_packet(false);
  uint32_t base = icrc(pkt.data(), pkt.size());
  for (size_t at : {size_t{8}, size_t{26}, size_t{32}}) {
    std::vector<uint8_t> changed = pkt;
    changed[at] ^= at == 32 ? 0x80 : 0x01;
    EXPECT_EQ(icrc(changed.data(), changed.size()), base) << at;
  }
}

#if defined(__x86_64__)
// The state components whose registers are not in their initial state
// (XGETBV with ECX=1, XINUSE): bit 2 is the upper halves of YMM0-15, bit 6
// the upper halves of ZMM0-15. Either dirty, every legacy-SSE instruction
// of this thread pays a false dependency on them. 0 where XINUSE cannot be
// read (no XSAVE, or no XGETBV with ECX=1).
uint64_t dirty_upper_vector_state() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx) || !(ecx & bit_OSXSAVE)) return 0;
  if (!__get_cpuid_count(0xd, 1, &eax, &ebx, &ecx, &edx) || !(eax & (1u << 2))) return 0;
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
  return ((uint64_t{hi} << 32) | lo) & ((1u << 2) | (1u << 6));
}

// The ICRC leaves the vector registers' upper halves clean for the
// application's code that runs after ours: ISA-L's AVX-512 CRC does not
// (an MPI rank's SSE matrix multiply ran 4x slower after each exchange).
// Where ISA-L's CRC leaves nothing dirty here (no AVX on this CPU), there
// is nothing to check.
TEST(RoceIcrc, LeavesUpperVectorHalvesClean) {
  std::vector<uint8_t> pkt = handmade_packet(false);
  pkt.resize(pkt.size() + 1024, 0x5a);  // (a packet's payload: ISA-L's wide code)
  std::vector<uint8_t> data(4096, 0xa5);
  (void)crc32_gzip_refl(0, data.data(), data.size());
  const uint64_t dirty_after_isal = dirty_upper_vector_state();
  __asm__ volatile("" ::: "memory");
  if (!dirty_after_isal) GTEST_SKIP() << "ISA-L's CRC leaves no upper vector state dirty on this CPU";
  (void)icrc(pkt.data(), pkt.size());
  EXPECT_EQ(dirty_upper_vector_state(), 0u) << "XINUSE after net::icrc";
}
#endif

TEST(RoceIcrc, RejectsNonIp) {
  std::vector<uint8_t> pkt = handmade_packet(false);
  EXPECT_EQ(icrc(pkt.data(), 20 + 8 + 11), 0u);  // BTH cut short
  pkt[0] = 0x55;
  EXPECT_EQ(icrc(pkt.data(), pkt.size()), 0u);
}

// ---------------------------------------------------------------- frames

FrameAddrs addrs(bool ipv6) {
  FrameAddrs a;
  const uint8_t src_mac[6] = {0x02, 0x11, 0x22, 0x33, 0x44, 0x55}, dst_mac[6] = {0x02, 0x66, 0x77, 0x88, 0x99, 0xAA};
  std::memcpy(a.src_mac, src_mac, 6);
  std::memcpy(a.dst_mac, dst_mac, 6);
  if (ipv6) {
    inet_pton(AF_INET6, "fd00::1:2", &a.src_ip);
    inet_pton(AF_INET6, "fe80::abcd", &a.dst_ip);
    a.flow_label = 0xABCDE;
  } else {
    inet_pton(AF_INET6, "::ffff:10.1.2.3", &a.src_ip);
    inet_pton(AF_INET6, "::ffff:10.4.5.6", &a.dst_ip);
  }
  a.udp_sport = ud_udp_sport(0x12);
  a.traffic_class = 0x68;
  a.hop_limit = 17;
  return a;
}

void expect_same_addrs(const FrameAddrs& want, const FrameAddrs& got) {
  EXPECT_EQ(std::memcmp(got.src_mac, want.src_mac, 6), 0);
  EXPECT_EQ(std::memcmp(got.dst_mac, want.dst_mac, 6), 0);
  EXPECT_EQ(std::memcmp(&got.src_ip, &want.src_ip, 16), 0);
  EXPECT_EQ(std::memcmp(&got.dst_ip, &want.dst_ip, 16), 0);
  EXPECT_EQ(got.udp_sport, want.udp_sport);
  EXPECT_EQ(got.udp_dport, want.udp_dport);
  EXPECT_EQ(got.traffic_class, want.traffic_class);
  EXPECT_EQ(got.hop_limit, want.hop_limit);
  EXPECT_EQ(got.flow_label, want.ipv4() ? 0 : want.flow_label);
}

uint16_t be16(const std::vector<uint8_t>& f, size_t at) { return static_cast<uint16_t>(f[at] << 8 | f[at + 1]); }

TEST(RoceFrame, RoundTripsIpv4AndIpv6) {
  const std::vector<uint8_t> payload = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  for (bool ipv6 : {false, true}) {
    for (uint8_t opcode : {0x04, 0x0B, 0x11, 0x12, 0x65, 0xAB, 0xB3}) {
      const OpcodeInfo& info = *opcode_info(opcode);
      SCOPED_TRACE(std::string(info.name) + (ipv6 ? " IPv6" : " IPv4"));
      FrameAddrs a = addrs(ipv6);
      RocePacket p = distinctive(info, opcode);
      size_t len = info.is(kPayload) ? payload.size() : 0;
      std::vector<uint8_t> f = build_frame(a, p, payload.data(), len);
      size_t ip_len = ipv6 ? kIpv6HeaderBytes : kIpv4HeaderBytes;
      ASSERT_EQ(f.size(), kEthHeaderBytes + ip_len + kUdpHeaderBytes + info.header_bytes + len + pad_for(len) + 4);
      EXPECT_EQ(be16(f, 12), ipv6 ? 0x86DD : 0x0800);
      if (!ipv6) {
        EXPECT_EQ(be16(f, 14 + 6), 0x4000);  // DF
        EXPECT_EQ(f[14 + 8], 17);             // TTL
        EXPECT_EQ(be16(f, 14 + 20 + 6), 0);   // no UDP checksum, as rxe
      } else {
        EXPECT_NE(be16(f, 14 + 40 + 6), 0);  // mandatory in IPv6
      }
      EXPECT_EQ(be16(f, 14 + ip_len + 2), 4791);

      ParsedFrame parsed;
      ASSERT_TRUE(parse_frame(f.data(), f.size(), &parsed)) << to_string(parsed.error);
      EXPECT_EQ(parsed.error, FrameError::kNone);
      expect_same_addrs(a, parsed.addrs);
      p.bth.pad = pad_for(len);
      expect_same_headers(info, p, parsed.packet);
      ASSERT_EQ(parsed.packet.payload_len, len);
      EXPECT_EQ(std::memcmp(parsed.packet.payload, payload.data(), len), 0);

      // Ethernet minimum-size padding after the datagram is not ours.
      std::vector<uint8_t> padded = f;
      padded.resize(std::max<size_t>(f.size() + 2, 60), 0);
      EXPECT_TRUE(parse_frame(padded.data(), padded.size(), &parsed));
    }
  }
}

TEST(RoceFrame, EveryPayloadBitIsProtected) {
  for (bool ipv6 : {false, true}) {
    RocePacket p;
    p.bth.opcode = 0x24;  // UC_SEND_ONLY
    const std::vector<uint8_t> payload = {0x10, 0x20, 0x30, 0x40, 0x50};
    std::vector<uint8_t> f = build_frame(addrs(ipv6), p, payload.data(), payload.size());
    size_t at = f.size() - 4 - 3 - payload.size();
    for (size_t byte = at; byte < at + payload.size(); ++byte) {
      for (int bit = 0; bit < 8; ++bit) {
        std::vector<uint8_t> bad = f;
        bad[byte] ^= static_cast<uint8_t>(1 << bit);
        if (ipv6) {  // keep the UDP checksum right so that the ICRC is what catches it
          bad[14 + 40 + 6] = bad[14 + 40 + 7] = 0;
        }
        ParsedFrame parsed;
        EXPECT_FALSE(parse_frame(bad.data(), bad.size(), &parsed));
        EXPECT_EQ(parsed.error, FrameError::kBadIcrc) << byte << ":" << bit;
      }
    }
  }
}

TEST(RoceFrame, RejectsWhatIsNotOurs) {
  RocePacket p;
  p.bth.opcode = 0x04;
  const uint8_t payload[4] = {1, 2, 3, 4};
  std::vector<uint8_t> f = build_frame(addrs(false), p, payload, 4);
  ParsedFrame parsed;

  EXPECT_FALSE(parse_frame(f.data(), f.size(), &parsed, 14791));  // another port
  EXPECT_EQ(parsed.error, FrameError::kNotRoce);
  FrameAddrs other = addrs(false);
  other.udp_dport = 14791;
  std::vector<uint8_t> g = build_frame(other, p, payload, 4);
  EXPECT_TRUE(parse_frame(g.data(), g.size(), &parsed, 14791));

  std::vector<uint8_t> arp = f;
  arp[12] = 0x08;
  arp[13] = 0x06;
  EXPECT_FALSE(parse_frame(arp.data(), arp.size(), &parsed));
  EXPECT_EQ(parsed.error, FrameError::kNotRoce);

  std::vector<uint8_t> bad_ip_csum = f;
  bad_ip_csum[14 + 10] ^= 1;
  EXPECT_FALSE(parse_frame(bad_ip_csum.data(), bad_ip_csum.size(), &parsed));
  EXPECT_EQ(parsed.error, FrameError::kMalformed);

  for (size_t cut : {size_t{10}, size_t{14 + 19}, size_t{14 + 20 + 7}, f.size() - 1}) {
    EXPECT_FALSE(parse_frame(f.data(), cut, &parsed)) << cut;
    EXPECT_EQ(parsed.error, FrameError::kMalformed) << cut;
  }

  std::vector<uint8_t> bad_icrc = f;
  bad_icrc.back() ^= 0x80;
  EXPECT_FALSE(parse_frame(bad_icrc.data(), bad_icrc.size(), &parsed));
  EXPECT_EQ(parsed.error, FrameError::kBadIcrc);

  // Unknown opcode with a correct ICRC: malformed, not corrupted.
  std::vector<uint8_t> unknown = f;
  unknown[14 + 20 + 8] = 0x1F;
  uint32_t crc = icrc(unknown.data() + 14, unknown.size() - 14 - 4);
  for (int i = 0; i < 4; ++i) unknown[unknown.size() - 4 + i] = static_cast<uint8_t>(crc >> (8 * i));
  EXPECT_FALSE(parse_frame(unknown.data(), unknown.size(), &parsed));
  EXPECT_EQ(parsed.error, FrameError::kMalformed);

  // IPv6 with a wrong UDP checksum.
  std::vector<uint8_t> v6 = build_frame(addrs(true), p, payload, 4);
  v6[14 + 40 + 6] ^= 0x01;
  EXPECT_FALSE(parse_frame(v6.data(), v6.size(), &parsed));
  EXPECT_EQ(parsed.error, FrameError::kMalformed);
}

TEST(RoceFrame, BuildRefusesInconsistentInput) {
  RocePacket p;
  p.bth.opcode = 0x04;
  FrameAddrs mixed = addrs(false);
  inet_pton(AF_INET6, "fd00::2", &mixed.dst_ip);
  uint8_t byte = 0;
  EXPECT_TRUE(build_frame(mixed, p, &byte, 1).empty());
  p.bth.opcode = 0x11;  // ACK carries no payload
  EXPECT_TRUE(build_frame(addrs(false), p, &byte, 1).empty());
  EXPECT_FALSE(build_frame(addrs(false), p, nullptr, 0).empty());
  p.bth.opcode = 0x15;
  EXPECT_TRUE(build_frame(addrs(false), p, nullptr, 0).empty());
  p.bth.opcode = 0x04;
  std::vector<uint8_t> huge(70000);
  EXPECT_TRUE(build_frame(addrs(false), p, huge.data(), huge.size()).empty());
}

// ---------------------------------------------------------------- pcap

std::string temp_path(const char* name) {
  return ::testing::TempDir() + "/" + name + "." + std::to_string(::getpid()) + ".pcap";
}

TEST(RocePcap, WritesClassicPcapFromManyThreads) {
  std::string path = temp_path("roce_pcap");
  PcapWriter w;
  ASSERT_TRUE(w.open(path)) << w.last_error();
  RocePacket p;
  p.bth.opcode = 0x04;
  const uint8_t payload[3] = {7, 8, 9};
  std::vector<uint8_t> frame = build_frame(addrs(false), p, payload, 3);
  constexpr int kThreads = 4, kPerThread = 50;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) EXPECT_TRUE(w.write(frame.data(), frame.size()));
    });
  for (auto& t : threads) t.join();
  ASSERT_TRUE(w.close());

  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  ASSERT_GE(file.size(), 24u);
  auto le32 = [&](size_t at) {
    uint32_t v;
    std::memcpy(&v, file.data() + at, 4);  // pcap fields are in the writer's order
    return v;
  };
  EXPECT_EQ(le32(0), 0xA1B2C3D4u);
  EXPECT_EQ(file[4] | file[5] << 8, 2);  // version 2.4, host order (little-endian here)
  EXPECT_EQ(file[6] | file[7] << 8, 4);
  EXPECT_EQ(le32(16), 65535u);
  EXPECT_EQ(le32(20), 1u);  // LINKTYPE_ETHERNET
  size_t off = 24;
  int records = 0;
  while (off + 16 <= file.size()) {
    EXPECT_EQ(le32(off + 8), frame.size());
    EXPECT_EQ(le32(off + 12), frame.size());
    EXPECT_LT(le32(off + 4), 1000000u);  // microseconds
    EXPECT_EQ(std::memcmp(file.data() + off + 16, frame.data(), frame.size()), 0);
    off += 16 + frame.size();
    ++records;
  }
  EXPECT_EQ(off, file.size());
  EXPECT_EQ(records, kThreads * kPerThread);
}

TEST(RocePcap, SnaplenAndErrors) {
  std::string path = temp_path("roce_snap");
  PcapWriter w;
  EXPECT_FALSE(w.write(nullptr, 0));  // not open
  ASSERT_TRUE(w.open(path, 20));
  std::vector<uint8_t> frame(64, 0xAB);
  ASSERT_TRUE(w.write(frame.data(), frame.size(), std::chrono::system_clock::time_point{std::chrono::seconds(5)}));
  ASSERT_TRUE(w.close());
  EXPECT_TRUE(w.close());
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  ASSERT_EQ(file.size(), 24u + 16 + 20);
  EXPECT_EQ(file[24], 5);       // seconds
  EXPECT_EQ(file[24 + 8], 20);  // captured length
  EXPECT_EQ(file[24 + 12], 64);  // original length

  PcapWriter bad;
  EXPECT_FALSE(bad.open("/nonexistent-dir/x.pcap"));
  EXPECT_NE(bad.last_error().find("x.pcap"), std::string::npos);
  EXPECT_FALSE(bad.write(frame.data(), frame.size()));
  if (std::FILE* probe = std::fopen("/dev/full", "wb")) {  // every write fails with ENOSPC
    std::fclose(probe);
    PcapWriter full;
    EXPECT_FALSE(full.open("/dev/full"));
    EXPECT_FALSE(full.last_error().empty());
    EXPECT_FALSE(full.is_open());
    EXPECT_FALSE(full.write(frame.data(), frame.size()));
  }
}

TEST(RoceAddresses, GroupAddressesAreIpv4ClassDAndIpv6Ff) {
  EXPECT_TRUE(is_multicast(v4_mapped(htonl(0xE0000051))));   // 224.0.0.81
  EXPECT_TRUE(is_multicast(v4_mapped(htonl(0xEF5D0007))));   // 239.93.0.7
  EXPECT_FALSE(is_multicast(v4_mapped(htonl(0xF0000001))));  // 240.0.0.1: class E
  EXPECT_FALSE(is_multicast(v4_mapped(htonl(0x0A5D0001))));  // 10.93.0.1
  in6_addr group{}, unicast{}, unmapped_class_d{};
  ASSERT_EQ(inet_pton(AF_INET6, "ff0e::93:7", &group), 1);
  ASSERT_EQ(inet_pton(AF_INET6, "fd93::1", &unicast), 1);
  ASSERT_EQ(inet_pton(AF_INET6, "::e000:51", &unmapped_class_d), 1);  // not ::ffff:
  EXPECT_TRUE(is_multicast(group));
  EXPECT_FALSE(is_multicast(unicast));
  EXPECT_FALSE(is_multicast(unmapped_class_d));
}

}  // namespace
}  // namespace sv::net
