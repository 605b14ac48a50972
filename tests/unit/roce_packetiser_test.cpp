// Work requests to packets (net/roce_packetiser.h): every packet of every
// work request carries the headers the opcode table says it must, its
// opcode names the work request back, and the cut is the MTU's.
#include "net/roce_packetiser.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <vector>

namespace sv::net {
namespace {

const std::vector<ibv_wr_opcode> kDataOps = {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM, IBV_WR_SEND_WITH_INV, IBV_WR_RDMA_WRITE,
                                             IBV_WR_RDMA_WRITE_WITH_IMM};

Request request(ibv_qp_type type, ibv_wr_opcode op, uint64_t length, uint32_t mtu = 1024) {
  Request r;
  r.type = type;
  r.opcode = op;
  r.src_qpn = 0x010005;
  r.dst_qpn = 0x020007;
  r.qkey = 0x11111111;
  r.xrc_srqn = 0x33;
  r.imm = htonl(0xabcdef01);
  r.solicited = true;
  r.remote_addr = 0x7f0000001000;
  r.rkey = 0x4242;
  r.length = length;
  r.mtu = mtu;
  r.first_psn = 0xFFFFFE;  // wraps within the message
  return r;
}

TEST(RocePacketiser, EveryPacketOfASendOrWriteIsWhatItsOpcodeSays) {
  for (ibv_qp_type type : {IBV_QPT_RC, IBV_QPT_UC, IBV_QPT_XRC_SEND})
    for (ibv_wr_opcode op : kDataOps)
      for (uint64_t length : {0ull, 1ull, 1024ull, 1025ull, 5000ull}) {
        if (type == IBV_QPT_UC && (op == IBV_WR_SEND_WITH_INV)) continue;  // UC has no SEND with invalidate
        const Request r = request(type, op, length);
        const uint32_t n = psns_of(r);
        ASSERT_EQ(n, length == 0 ? 1u : (length + 1023) / 1024);
        for (uint32_t i = 0; i < n; ++i) {
          SCOPED_TRACE(testing::Message() << "type " << type << " op " << op << " length " << length << " packet " << i);
          const RocePacket p = request_packet(r, i);
          const OpcodeInfo* info = opcode_info(p.bth.opcode);
          ASSERT_NE(info, nullptr);
          EXPECT_EQ(qp_type_of(p.bth.opcode), type);
          EXPECT_TRUE(info->is(kRequest));
          EXPECT_EQ(info->starts_message(), i == 0);
          EXPECT_EQ(info->ends_message(), i + 1 == n);
          EXPECT_EQ(info->is(kSend), is_send(op));
          EXPECT_EQ(info->has(Ext::kReth), i == 0 && !is_send(op));
          EXPECT_EQ(info->has(Ext::kXrceth), type == IBV_QPT_XRC_SEND);
          EXPECT_EQ(p.bth.psn, (r.first_psn + i) & kMask24);
          EXPECT_EQ(p.bth.dest_qp, r.dst_qpn);
          const bool last = i + 1 == n;
          EXPECT_EQ(p.bth.ack_req, last && type != IBV_QPT_UC);
          if (last) {
            // The last packet names the work request exactly.
            EXPECT_EQ(wr_opcode_of(p.bth.opcode), op);
            EXPECT_EQ(info->has(Ext::kImmDt), op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM);
            EXPECT_EQ(info->has(Ext::kIeth), op == IBV_WR_SEND_WITH_INV);
            EXPECT_TRUE(p.bth.se);
            if (op == IBV_WR_SEND_WITH_INV)
              EXPECT_EQ(p.ieth, r.imm);
            else
              EXPECT_EQ(p.imm, 0xabcdef01u);
          } else {
            EXPECT_FALSE(p.bth.se);
            EXPECT_EQ(wr_opcode_of(p.bth.opcode), is_send(op) ? IBV_WR_SEND : IBV_WR_RDMA_WRITE);
          }
          if (info->has(Ext::kReth)) {
            EXPECT_EQ(p.reth.va, r.remote_addr);
            EXPECT_EQ(p.reth.len, length);
          }
        }
      }
}

TEST(RocePacketiser, AUdSendIsOnePacketWithItsDeth) {
  for (ibv_wr_opcode op : {IBV_WR_SEND, IBV_WR_SEND_WITH_IMM}) {
    Request r = request(IBV_QPT_UD, op, 300, 300);
    ASSERT_EQ(psns_of(r), 1u);
    const RocePacket p = request_packet(r, 0);
    const OpcodeInfo* info = opcode_info(p.bth.opcode);
    ASSERT_NE(info, nullptr);
    EXPECT_EQ(p.bth.opcode & kTransportMask, kTransportUd);
    EXPECT_TRUE(info->has(Ext::kDeth));
    EXPECT_EQ(p.deth.qkey, r.qkey);
    EXPECT_EQ(p.deth.src_qp, r.src_qpn);
    EXPECT_FALSE(p.bth.ack_req);
    EXPECT_EQ(wr_opcode_of(p.bth.opcode), op);
  }
}

// A READ asked again from its i-th response asks for the rest of its range
// with that response's PSN (rxe finds it among its read resources).
TEST(RocePacketiser, AReadAskedAgainAsksForTheRest) {
  for (ibv_qp_type type : {IBV_QPT_RC, IBV_QPT_XRC_SEND}) {
    const Request r = request(type, IBV_WR_RDMA_READ, 5000);
    ASSERT_EQ(psns_of(r), 5u);
    for (uint32_t i = 0; i < 5; ++i) {
      const RocePacket p = request_packet(r, i);
      EXPECT_EQ(p.bth.opcode & ~kTransportMask, kReadRequest);
      EXPECT_EQ(p.bth.psn, (r.first_psn + i) & kMask24);
      EXPECT_EQ(p.reth.va, r.remote_addr + i * 1024);
      EXPECT_EQ(p.reth.len, 5000 - i * 1024);
      EXPECT_EQ(p.reth.rkey, r.rkey);
      EXPECT_TRUE(p.bth.ack_req);
      EXPECT_EQ(opcode_info(p.bth.opcode)->has(Ext::kXrceth), type == IBV_QPT_XRC_SEND);
    }
  }
}

TEST(RocePacketiser, AtomicsNameTheirOperandsAsTheSpecDoes) {
  Request r = request(IBV_QPT_RC, IBV_WR_ATOMIC_CMP_AND_SWP, 8);
  r.compare_add = 5;
  r.swap = 9;
  EXPECT_EQ(psns_of(r), 1u);
  RocePacket p = request_packet(r, 0);
  EXPECT_EQ(p.bth.opcode, kTransportRc | kCompareSwap);
  EXPECT_EQ(p.atomic_eth.compare, 5u);
  EXPECT_EQ(p.atomic_eth.swap_add, 9u);
  EXPECT_EQ(wr_opcode_of(p.bth.opcode), IBV_WR_ATOMIC_CMP_AND_SWP);
  r.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
  p = request_packet(r, 0);
  EXPECT_EQ(p.bth.opcode, kTransportRc | kFetchAdd);
  EXPECT_EQ(p.atomic_eth.swap_add, 5u);
  EXPECT_EQ(p.atomic_eth.compare, 0u);
  EXPECT_EQ(wr_opcode_of(p.bth.opcode), IBV_WR_ATOMIC_FETCH_AND_ADD);
}

TEST(RocePacketiser, AnswersAreRcOpcodesWithTheirAeth) {
  const RocePacket ack = ack_packet(0x1234, 0x1000000 + 7, aeth_nak(NakCode::kRemoteAccessError), 0x1000003);
  EXPECT_EQ(ack.bth.opcode, kAck);
  EXPECT_EQ(ack.bth.psn, 7u);
  EXPECT_EQ(ack.aeth.msn, 3u);
  EXPECT_EQ(ack.aeth.syndrome, aeth_nak(NakCode::kRemoteAccessError));
  const RocePacket aa = atomic_ack_packet(0x1234, 9, 4, 0x1122334455667788ull);
  EXPECT_EQ(aa.bth.opcode, kAtomicAck);
  EXPECT_EQ(aa.atomic_ack, 0x1122334455667788ull);
  EXPECT_EQ(aa.aeth.syndrome, aeth_ack());
  const uint8_t expect[] = {kReadResponseFirst, kReadResponseMiddle, kReadResponseLast};
  for (uint32_t i = 0; i < 3; ++i) {
    const RocePacket rr = read_response_packet(0x1234, 0xFFFFFF, i, 3, 1);
    EXPECT_EQ(rr.bth.opcode, expect[i]);
    EXPECT_EQ(rr.bth.psn, (0xFFFFFF + i) & kMask24);
  }
  EXPECT_EQ(read_response_packet(0x1234, 5, 0, 1, 1).bth.opcode, kReadResponseOnly);
}

TEST(RocePacketiser, MessagesAreCutAtTheMtu) {
  EXPECT_EQ(packets_for(0, 256), 1u);
  EXPECT_EQ(packets_for(256, 256), 1u);
  EXPECT_EQ(packets_for(257, 256), 2u);
  EXPECT_EQ(packet_size(257, 1, 256), 1u);
  EXPECT_EQ(packet_size(257, 2, 256), 0u);
  EXPECT_EQ(packet_size(0, 0, 256), 0u);
  EXPECT_EQ(mtu_bytes(IBV_MTU_4096), 4096u);
  EXPECT_EQ(mtu_bytes(IBV_MTU_256), 256u);
  EXPECT_EQ(mtu_bytes(static_cast<ibv_mtu>(0)), 1024u);
}

}  // namespace
}  // namespace sv::net
