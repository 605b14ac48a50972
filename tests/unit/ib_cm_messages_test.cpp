// The IB CM codec (src/ibcm) against the IBTA layout: golden bytes at the
// offsets of the spec's tables (computed here by hand, not with the codec's
// own field table), round trips of every message, and malformed input.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <vector>

#include "ibcm/bit_field.h"
#include "ibcm/cm_messages.h"
#include "ibcm/mad_header.h"

namespace sv::ibcm {
namespace {

// Big-endian reads at a byte offset of the MAD, independent of bit_field.h.
uint64_t be(const std::array<uint8_t, kMadSize>& mad, size_t off, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v = (v << 8) | mad[off + i];
  return v;
}

template <size_t N>
std::array<uint8_t, N> pattern(uint8_t seed) {
  std::array<uint8_t, N> a;
  for (size_t i = 0; i < N; ++i) a[i] = static_cast<uint8_t>(seed + i * 7);
  return a;
}

Gid gid(uint8_t seed) { return pattern<16>(seed); }

CmPath path(uint8_t seed) {
  CmPath p;
  p.local_port_lid = static_cast<uint16_t>(0x1100 + seed);
  p.remote_port_lid = static_cast<uint16_t>(0x2200 + seed);
  p.local_port_gid = gid(seed);
  p.remote_port_gid = gid(static_cast<uint8_t>(seed + 100));
  p.flow_label = 0xABCDE;
  p.packet_rate = 0x2B;
  p.traffic_class = 0x60;
  p.hop_limit = 0x40;
  p.sl = 0xA;
  p.subnet_local = 1;
  p.local_ack_timeout = 0x13;
  return p;
}

Req full_req() {
  Req r;
  r.local_comm_id = 0x11223344;
  r.service_id = 0x0000000001061D2F;
  r.local_ca_guid = 0x0002C9FFFE123456;
  r.local_qkey = 0x80010000;
  r.local_qpn = 0xABCDEF;
  r.responder_resources = 0x12;
  r.local_eecn = 0x345678;
  r.initiator_depth = 0x9A;
  r.remote_eecn = 0xBCDEF0;
  r.remote_cm_response_timeout = 0x15;
  r.transport_service = TransportService::kUc;
  r.end_to_end_flow_control = 1;
  r.starting_psn = 0x765432;
  r.local_cm_response_timeout = 0x0E;
  r.retry_count = 5;
  r.pkey = 0xFFFF;
  r.path_mtu = 3;
  r.rdc_exists = 1;
  r.rnr_retry_count = 6;
  r.max_cm_retries = 0xF;
  r.srq = 1;
  r.extended_transport_type = 1;
  r.primary = path(1);
  r.alternate = path(2);
  r.sap_supported = 1;
  r.private_data = pattern<kReqPrivateDataSize>(3);
  return r;
}

TEST(IbCmMad, HeaderBytes) {
  MadHeader h;
  h.status = 0x1234;
  h.class_specific = 0x5678;
  h.transaction_id = 0x0102030405060708;
  h.attribute_id = 0x0010;
  h.attribute_modifier = 0xA0B0C0D0;
  std::array<uint8_t, kMadHeaderSize> b{};
  b.fill(0xEE);
  encode_mad_header(h, b);
  const std::array<uint8_t, kMadHeaderSize> want = {
      0x01, 0x07, 0x02, 0x03, 0x12, 0x34, 0x56, 0x78, 0x01, 0x02, 0x03, 0x04,
      0x05, 0x06, 0x07, 0x08, 0x00, 0x10, 0x00, 0x00, 0xA0, 0xB0, 0xC0, 0xD0};
  EXPECT_EQ(b, want);
  EXPECT_EQ(decode_mad_header(b), h);
}

TEST(IbCmBits, FieldsCrossBytesAndLeaveNeighboursAlone) {
  std::array<uint8_t, 4> b{};
  b.fill(0xFF);
  put_bits(b, BitField{0, 4, 12}, 0x000);  // low nibble of byte 0, all of byte 1
  EXPECT_EQ(b[0], 0xF0);
  EXPECT_EQ(b[1], 0x00);
  EXPECT_EQ(b[2], 0xFF);
  put_bits(b, BitField{0, 4, 12}, 0xFABC);  // too wide: truncated to 0xABC
  EXPECT_EQ(b[0], 0xFA);
  EXPECT_EQ(b[1], 0xBC);
  EXPECT_EQ(get_bits(b, BitField{0, 4, 12}), 0xABCu);
  EXPECT_EQ(get_bits(b, BitField{0, 0, 32}), 0xFABCFFFFu);
}

TEST(IbCmReq, GoldenOffsets) {
  CmMessage m{0xDEADBEEF00000001, full_req()};
  auto mad = encode(m);
  // MAD header: base version 1, class 0x07, class version 2, method Send,
  // transaction ID, attribute ID 0x0010, attribute modifier 0.
  EXPECT_EQ(be(mad, 0, 4), 0x01070203u);
  EXPECT_EQ(be(mad, 4, 4), 0u);
  EXPECT_EQ(be(mad, 8, 8), 0xDEADBEEF00000001u);
  EXPECT_EQ(be(mad, 16, 2), 0x0010u);
  EXPECT_EQ(be(mad, 18, 6), 0u);
  // Table 106, each at 24 + its byte offset.
  EXPECT_EQ(be(mad, 24, 4), 0x11223344u);          // local comm ID
  EXPECT_EQ(be(mad, 28, 4), 0u);                   // reserved
  EXPECT_EQ(be(mad, 32, 8), 0x0000000001061D2Fu);  // service ID
  EXPECT_EQ(be(mad, 40, 8), 0x0002C9FFFE123456u);  // local CA GUID
  EXPECT_EQ(be(mad, 48, 4), 0u);                   // reserved
  EXPECT_EQ(be(mad, 52, 4), 0x80010000u);          // local Q_Key
  EXPECT_EQ(be(mad, 56, 3), 0xABCDEFu);            // local QPN
  EXPECT_EQ(mad[59], 0x12);                        // responder resources
  EXPECT_EQ(be(mad, 60, 3), 0x345678u);            // local EECN
  EXPECT_EQ(mad[63], 0x9A);                        // initiator depth
  EXPECT_EQ(be(mad, 64, 3), 0xBCDEF0u);            // remote EECN
  EXPECT_EQ(mad[67], (0x15 << 3) | (1 << 1) | 1);  // remote CM timeout | UC | flow control
  EXPECT_EQ(be(mad, 68, 3), 0x765432u);            // starting PSN
  EXPECT_EQ(mad[71], (0x0E << 3) | 5);             // local CM timeout | retry count
  EXPECT_EQ(be(mad, 72, 2), 0xFFFFu);              // P_Key
  EXPECT_EQ(mad[74], (3 << 4) | (1 << 3) | 6);     // path MTU | RDC exists | RNR retry
  EXPECT_EQ(mad[75], (0xF << 4) | (1 << 3) | 1);   // max CM retries | SRQ | ext. transport
  EXPECT_EQ(be(mad, 76, 2), 0x1101u);              // primary local LID
  EXPECT_EQ(be(mad, 78, 2), 0x2201u);              // primary remote LID
  EXPECT_TRUE(std::equal(mad.begin() + 80, mad.begin() + 96, gid(1).begin()));
  EXPECT_TRUE(std::equal(mad.begin() + 96, mad.begin() + 112, gid(101).begin()));
  EXPECT_EQ(be(mad, 112, 4), (0xABCDEu << 12) | 0x2B);  // flow label | rsvd 6 | packet rate
  EXPECT_EQ(mad[116], 0x60);                        // traffic class
  EXPECT_EQ(mad[117], 0x40);                        // hop limit
  EXPECT_EQ(mad[118], (0xA << 4) | (1 << 3));       // SL | subnet local
  EXPECT_EQ(mad[119], 0x13 << 3);                   // local ACK timeout
  EXPECT_EQ(be(mad, 120, 2), 0x1102u);              // alternate local LID
  EXPECT_TRUE(std::equal(mad.begin() + 124, mad.begin() + 140, gid(2).begin()));
  EXPECT_EQ(be(mad, 156, 4), (0xABCDEu << 12) | 0x2B);
  EXPECT_EQ(mad[163], (0x13 << 3) | (1 << 2));      // alt ACK timeout | SAP supported
  auto pd = pattern<kReqPrivateDataSize>(3);
  EXPECT_TRUE(std::equal(mad.begin() + 164, mad.end(), pd.begin()));
}

TEST(IbCmRep, GoldenOffsets) {
  Rep r;
  r.local_comm_id = 0xA1A2A3A4;
  r.remote_comm_id = 0xB1B2B3B4;
  r.local_qkey = 0x01020304;
  r.local_qpn = 0x000123;
  r.local_eecn = 0x000456;
  r.starting_psn = 0xFEDCBA;
  r.responder_resources = 4;
  r.initiator_depth = 8;
  r.target_ack_delay = 0x1F;
  r.failover_accepted = 2;
  r.end_to_end_flow_control = 1;
  r.rnr_retry_count = 7;
  r.srq = 1;
  r.local_ca_guid = 0x1122334455667788;
  r.private_data = pattern<kRepPrivateDataSize>(9);
  auto mad = encode(CmMessage{7, r});
  EXPECT_EQ(be(mad, 16, 2), 0x0013u);
  EXPECT_EQ(be(mad, 24, 4), 0xA1A2A3A4u);
  EXPECT_EQ(be(mad, 28, 4), 0xB1B2B3B4u);
  EXPECT_EQ(be(mad, 32, 4), 0x01020304u);
  EXPECT_EQ(be(mad, 36, 4), 0x00012300u);  // QPN then a reserved byte
  EXPECT_EQ(be(mad, 40, 4), 0x00045600u);
  EXPECT_EQ(be(mad, 44, 4), 0xFEDCBA00u);
  EXPECT_EQ(mad[48], 4);
  EXPECT_EQ(mad[49], 8);
  EXPECT_EQ(mad[50], (0x1F << 3) | (2 << 1) | 1);
  EXPECT_EQ(mad[51], (7 << 5) | (1 << 4));
  EXPECT_EQ(be(mad, 52, 8), 0x1122334455667788u);  // a 64-bit field 4-byte aligned
  auto pd = pattern<kRepPrivateDataSize>(9);
  EXPECT_TRUE(std::equal(mad.begin() + 60, mad.end(), pd.begin()));
}

TEST(IbCmRej, GoldenOffsets) {
  Rej r;
  r.local_comm_id = 1;
  r.remote_comm_id = 2;
  r.message_rejected = MessageResponded::kRep;
  r.reject_info_length = 72;
  r.reason = static_cast<uint16_t>(RejReason::kConsumerDefined);
  r.ari = pattern<kRejAriSize>(1);
  r.private_data = pattern<kRejPrivateDataSize>(2);
  auto mad = encode(CmMessage{0, r});
  EXPECT_EQ(be(mad, 16, 2), 0x0012u);
  EXPECT_EQ(mad[32], 1 << 6);
  EXPECT_EQ(mad[33], 72 << 1);
  EXPECT_EQ(be(mad, 34, 2), 28u);
  EXPECT_TRUE(std::equal(mad.begin() + 36, mad.begin() + 108, r.ari.begin()));
  EXPECT_TRUE(std::equal(mad.begin() + 108, mad.end(), r.private_data.begin()));
}

TEST(IbCmOthers, GoldenOffsets) {
  Mra mra;
  mra.message_mraed = MessageResponded::kOther;
  mra.service_timeout = 0x11;
  mra.private_data = pattern<kMraPrivateDataSize>(4);
  auto mad = encode(CmMessage{0, mra});
  EXPECT_EQ(be(mad, 16, 2), 0x0011u);
  EXPECT_EQ(mad[32], 2 << 6);
  EXPECT_EQ(mad[33], 0x11 << 3);
  EXPECT_TRUE(std::equal(mad.begin() + 34, mad.end(), mra.private_data.begin()));

  Dreq dreq;
  dreq.remote_qpn_eecn = 0x0ABCDE;
  dreq.private_data = pattern<kDreqPrivateDataSize>(5);
  mad = encode(CmMessage{0, dreq});
  EXPECT_EQ(be(mad, 16, 2), 0x0015u);
  EXPECT_EQ(be(mad, 32, 4), 0x0ABCDE00u);
  EXPECT_TRUE(std::equal(mad.begin() + 36, mad.end(), dreq.private_data.begin()));

  Rtu rtu;
  rtu.local_comm_id = 0x01010101;
  rtu.remote_comm_id = 0x02020202;
  rtu.private_data = pattern<kRtuPrivateDataSize>(6);
  mad = encode(CmMessage{0, rtu});
  EXPECT_EQ(be(mad, 16, 2), 0x0014u);
  EXPECT_EQ(be(mad, 24, 8), 0x0101010102020202u);
  EXPECT_TRUE(std::equal(mad.begin() + 32, mad.end(), rtu.private_data.begin()));

  Drep drep;
  drep.private_data = pattern<kDrepPrivateDataSize>(7);
  mad = encode(CmMessage{0, drep});
  EXPECT_EQ(be(mad, 16, 2), 0x0016u);
  EXPECT_TRUE(std::equal(mad.begin() + 32, mad.end(), drep.private_data.begin()));

  SidrReq sreq;
  sreq.request_id = 0xCAFEF00D;
  sreq.pkey = 0x8001;
  sreq.service_id = 0x0000000001111D2F;
  sreq.private_data = pattern<kSidrReqPrivateDataSize>(8);
  mad = encode(CmMessage{0, sreq});
  EXPECT_EQ(be(mad, 16, 2), 0x0017u);
  EXPECT_EQ(be(mad, 24, 4), 0xCAFEF00Du);
  EXPECT_EQ(be(mad, 28, 4), 0x80010000u);  // P_Key then reserved
  EXPECT_EQ(be(mad, 32, 8), 0x0000000001111D2Fu);
  EXPECT_TRUE(std::equal(mad.begin() + 40, mad.end(), sreq.private_data.begin()));

  SidrRep srep;
  srep.request_id = 0xCAFEF00D;
  srep.status = static_cast<uint8_t>(SidrStatus::kNoQp);
  srep.additional_information_length = 16;
  srep.qpn = 0x123456;
  srep.service_id = 0x0000000001111D2F;
  srep.qkey = 0x01234567;
  srep.additional_information = pattern<kSidrRepInfoSize>(9);
  srep.private_data = pattern<kSidrRepPrivateDataSize>(10);
  mad = encode(CmMessage{0, srep});
  EXPECT_EQ(be(mad, 16, 2), 0x0018u);
  EXPECT_EQ(mad[28], 3);
  EXPECT_EQ(mad[29], 16);
  EXPECT_EQ(be(mad, 32, 4), 0x12345600u);
  EXPECT_EQ(be(mad, 36, 8), 0x0000000001111D2Fu);  // a 64-bit field 4-byte aligned
  EXPECT_EQ(be(mad, 44, 4), 0x01234567u);
  EXPECT_TRUE(std::equal(mad.begin() + 48, mad.begin() + 120, srep.additional_information.begin()));
  EXPECT_TRUE(std::equal(mad.begin() + 120, mad.end(), srep.private_data.begin()));
}

std::vector<CmBody> every_message() {
  Mra mra{0x01, 0x02, MessageResponded::kRep, 0x1F, pattern<kMraPrivateDataSize>(1)};
  Rej rej{0x03, 0x04, MessageResponded::kOther, 0x7F & 72, 8, pattern<kRejAriSize>(2),
          pattern<kRejPrivateDataSize>(3)};
  Rep rep{0x05, 0x06, 0x07, 0xFFFFFF, 0x800001, 0x00FF00, 255, 254, 0x1F, 3, 1, 7, 1,
          0xFEDCBA9876543210, pattern<kRepPrivateDataSize>(4)};
  Rtu rtu{0x08, 0x09, pattern<kRtuPrivateDataSize>(5)};
  Dreq dreq{0x0A, 0x0B, 0xFFFFFF, pattern<kDreqPrivateDataSize>(6)};
  Drep drep{0x0C, 0x0D, pattern<kDrepPrivateDataSize>(7)};
  SidrReq sreq{0x0E, 0x7FFF, 0x0000000001111234, pattern<kSidrReqPrivateDataSize>(8)};
  SidrRep srep{0x0F, 5, 72, 0xABCDEF, 0x0000000001111234, 0x80010000,
               pattern<kSidrRepInfoSize>(9), pattern<kSidrRepPrivateDataSize>(10)};
  return {full_req(), mra, rej, rep, rtu, dreq, drep, sreq, srep};
}

TEST(IbCm, RoundTripEveryMessage) {
  uint64_t tid = 0x1000;
  for (const CmBody& body : every_message()) {
    CmMessage in{++tid, body};
    auto mad = encode(in);
    EXPECT_EQ(be(mad, 16, 2), static_cast<uint16_t>(attribute_of(body)));
    CmMessage out;
    ASSERT_EQ(decode(mad, out), DecodeError::kNone) << static_cast<int>(attribute_of(body));
    EXPECT_EQ(out, in) << static_cast<int>(attribute_of(body));
    EXPECT_EQ(encode(out), mad);
  }
}

TEST(IbCm, ReservedBitsAreZeroAndIgnored) {
  // Every field at its maximum: the bits no field claims stay zero.
  Req r = full_req();
  r.primary.flow_label = 0xFFFFF;
  r.primary.packet_rate = 0x3F;
  auto mad = encode(CmMessage{0, r});
  EXPECT_EQ(be(mad, 112, 3), 0xFFFFF0u);  // 20-bit flow label, then 4 reserved bits
  EXPECT_EQ(mad[115], 0x3F);              // 2 more reserved bits, the 6-bit packet rate
  EXPECT_EQ(mad[118] & 0x07, 0);
  EXPECT_EQ(mad[119] & 0x07, 0);
  // A receiver ignores reserved bits.
  mad[28] = 0xFF;   // reserved word after the local comm ID
  mad[119] |= 0x07;
  CmMessage out;
  ASSERT_EQ(decode(mad, out), DecodeError::kNone);
  EXPECT_EQ(std::get<Req>(out.body), r);
}

TEST(IbCm, TooWideValuesAreTruncatedNotSpilled) {
  Req r;
  r.local_qpn = 0xFF123456;       // 24 bits
  r.responder_resources = 0x00;
  r.retry_count = 0xFF;           // 3 bits
  r.local_cm_response_timeout = 0;
  auto mad = encode(CmMessage{0, r});
  EXPECT_EQ(be(mad, 56, 4), 0x12345600u);
  EXPECT_EQ(mad[71], 0x07);
}

TEST(IbCm, RejectsMalformedInput) {
  auto good = encode(CmMessage{1, full_req()});
  CmMessage out;
  out.transaction_id = 77;

  // Short: every length below a MAD, read from an exact-size heap buffer so
  // that a read past the end is caught under ASan.
  for (size_t n = 0; n < kMadSize; ++n) {
    std::vector<uint8_t> buf(good.begin(), good.begin() + n);
    EXPECT_EQ(decode(buf, out), DecodeError::kShortBuffer) << n;
  }
  std::vector<uint8_t> exact(good.begin(), good.end());
  EXPECT_EQ(decode(exact, out), DecodeError::kNone);
  std::vector<uint8_t> longer(good.begin(), good.end());
  longer.resize(300, 0xAB);  // a longer buffer: the MAD is its first 256 bytes
  EXPECT_EQ(decode(longer, out), DecodeError::kNone);

  auto with = [&](size_t off, uint8_t v) {
    auto m = good;
    m[off] = v;
    return m;
  };
  out.transaction_id = 77;
  EXPECT_EQ(decode(with(0, 2), out), DecodeError::kBadBaseVersion);
  EXPECT_EQ(decode(with(1, 0x03), out), DecodeError::kBadClass);  // SA class
  EXPECT_EQ(decode(with(2, 1), out), DecodeError::kBadClassVersion);
  EXPECT_EQ(decode(with(3, 0x01), out), DecodeError::kBadMethod);  // Get
  EXPECT_EQ(decode(with(3, 0x83), out), DecodeError::kBadMethod);  // a response bit
  EXPECT_EQ(decode(with(17, 0x19), out), DecodeError::kUnknownAttribute);  // LAP
  EXPECT_EQ(decode(with(17, 0x1A), out), DecodeError::kUnknownAttribute);  // APR
  EXPECT_EQ(decode(with(17, 0x01), out), DecodeError::kUnknownAttribute);  // ClassPortInfo
  EXPECT_EQ(decode(with(16, 0x01), out), DecodeError::kUnknownAttribute);  // 0x0110
  EXPECT_EQ(out.transaction_id, 77u) << "a failed decode leaves its output alone";

  Rej rej;
  auto rej_mad = encode(CmMessage{0, rej});
  rej_mad[33] = 73 << 1;
  EXPECT_EQ(decode(rej_mad, out), DecodeError::kBadLength);
  rej_mad[33] = 72 << 1;
  EXPECT_EQ(decode(rej_mad, out), DecodeError::kNone);

  SidrRep srep;
  auto srep_mad = encode(CmMessage{0, srep});
  srep_mad[29] = 73;
  EXPECT_EQ(decode(srep_mad, out), DecodeError::kBadLength);

  for (auto e : {DecodeError::kNone, DecodeError::kShortBuffer, DecodeError::kBadLength})
    EXPECT_STRNE(to_string(e), "");
}

TEST(IbCm, RandomBytesDecodeToAFixedPoint) {
  // Whatever the payload, a CM MAD decodes without reading outside it, and
  // re-encoding what was decoded decodes to the same message.
  std::mt19937 rng(12345);
  const uint16_t attrs[] = {0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18};
  for (int i = 0; i < 2000; ++i) {
    std::vector<uint8_t> buf(kMadSize);
    for (auto& b : buf) b = static_cast<uint8_t>(rng());
    buf[0] = 1;
    buf[1] = 7;
    buf[2] = 2;
    buf[3] = 3;
    buf[16] = 0;
    buf[17] = static_cast<uint8_t>(attrs[i % 9]);
    buf[33] &= 0x7F;  // REJ: keep the lengths legal for most draws
    buf[29] = buf[29] % 73;
    CmMessage m;
    DecodeError e = decode(buf, m);
    if (e != DecodeError::kNone) {
      EXPECT_EQ(e, DecodeError::kBadLength);
      continue;
    }
    auto again = encode(m);
    CmMessage m2;
    ASSERT_EQ(decode(again, m2), DecodeError::kNone);
    EXPECT_EQ(m2, m);
  }
}

}  // namespace
}  // namespace sv::ibcm
