#include "net/roce_packetiser.h"

#include <arpa/inet.h>

#include <array>

namespace sv::net {
namespace {

// The operations a message's packets take, by their place in it.
struct Sequence {
  uint8_t first, middle, last, only;
  uint8_t at(uint32_t i, uint32_t n) const {
    if (n <= 1) return only;
    return i == 0 ? first : i + 1 == n ? last : middle;
  }
};

// Which operations each work request becomes: the one table both
// directions read (request_packet forward, wr_opcode_of back).
struct WrRow {
  ibv_wr_opcode wr;
  Sequence ops;
};
constexpr std::array kWrRows = {
    WrRow{IBV_WR_SEND, {kSendFirst, kSendMiddle, kSendLast, kSendOnly}},
    WrRow{IBV_WR_SEND_WITH_IMM, {kSendFirst, kSendMiddle, kSendLastImm, kSendOnlyImm}},
    WrRow{IBV_WR_SEND_WITH_INV, {kSendFirst, kSendMiddle, kSendLastInv, kSendOnlyInv}},
    WrRow{IBV_WR_RDMA_WRITE, {kWriteFirst, kWriteMiddle, kWriteLast, kWriteOnly}},
    WrRow{IBV_WR_RDMA_WRITE_WITH_IMM, {kWriteFirst, kWriteMiddle, kWriteLastImm, kWriteOnlyImm}},
    // One request however long the answer: the sequence is of one packet.
    WrRow{IBV_WR_RDMA_READ, {kReadRequest, kReadRequest, kReadRequest, kReadRequest}},
    WrRow{IBV_WR_ATOMIC_CMP_AND_SWP, {kCompareSwap, kCompareSwap, kCompareSwap, kCompareSwap}},
    WrRow{IBV_WR_ATOMIC_FETCH_AND_ADD, {kFetchAdd, kFetchAdd, kFetchAdd, kFetchAdd}},
};
constexpr Sequence kReadResponses{kReadResponseFirst, kReadResponseMiddle, kReadResponseLast, kReadResponseOnly};

struct TransportRow {
  ibv_qp_type type;
  uint8_t base;
};
constexpr std::array kTransports = {
    TransportRow{IBV_QPT_RC, kTransportRc},
    TransportRow{IBV_QPT_UC, kTransportUc},
    TransportRow{IBV_QPT_UD, kTransportUd},
    TransportRow{IBV_QPT_XRC_SEND, kTransportXrc},
};

const WrRow* row_of(ibv_wr_opcode op) {
  for (const WrRow& r : kWrRows)
    if (r.wr == op) return &r;
  return &kWrRows[0];
}

RocePacket header(uint8_t opcode, uint32_t dst_qpn, uint32_t psn) {
  RocePacket p;
  p.bth.opcode = opcode;
  p.bth.dest_qp = dst_qpn & kMask24;
  p.bth.psn = psn & kMask24;
  return p;
}

}  // namespace

uint8_t transport_base(ibv_qp_type t) {
  for (const TransportRow& r : kTransports)
    if (r.type == t) return r.base;
  return kTransportRc;
}

ibv_qp_type qp_type_of(uint8_t opcode) {
  for (const TransportRow& r : kTransports)
    if (r.base == (opcode & kTransportMask)) return r.type;
  return IBV_QPT_RC;
}

// A message's last (or only) packet names its work request exactly; a
// first or middle packet only its kind (the first row of that kind).
// Looked up for every packet a responder takes: a table, made from the rows
// at compile time (the two loops over them were 87 instructions a packet).
constexpr std::array<ibv_wr_opcode, 32> kWrOpcodeOf = [] {
  std::array<ibv_wr_opcode, 32> of{};
  std::array<bool, 32> named{};
  for (int pass = 0; pass < 2; ++pass)
    for (const WrRow& r : kWrRows)
      for (const uint8_t op : pass == 0 ? std::array{r.ops.last, r.ops.only} : std::array{r.ops.first, r.ops.middle})
        if (!named[op]) {
          of[op] = r.wr;
          named[op] = true;
        }
  for (size_t op = 0; op < of.size(); ++op)
    if (!named[op]) of[op] = IBV_WR_SEND;
  return of;
}();

ibv_wr_opcode wr_opcode_of(uint8_t opcode) {
  const uint8_t op = opcode & ~kTransportMask;
  return op < kWrOpcodeOf.size() ? kWrOpcodeOf[op] : IBV_WR_SEND;
}

RocePacket request_packet(const Request& r, uint32_t i) {
  const uint8_t base = transport_base(r.type);
  if (r.opcode == IBV_WR_RDMA_READ) {
    const uint64_t done = packet_offset(i, r.mtu) < r.length ? packet_offset(i, r.mtu) : r.length;
    RocePacket p = header(base | kReadRequest, r.dst_qpn, r.first_psn + i);
    p.xrceth.srqn = r.xrc_srqn;
    p.reth = Reth{r.remote_addr + done, r.rkey, static_cast<uint32_t>(r.length - done)};
    p.bth.ack_req = true;
    return p;
  }
  if (is_atomic(r.opcode)) {
    const bool cas = r.opcode == IBV_WR_ATOMIC_CMP_AND_SWP;
    RocePacket p = header(base | row_of(r.opcode)->ops.only, r.dst_qpn, r.first_psn);
    p.xrceth.srqn = r.xrc_srqn;
    p.atomic_eth.va = r.remote_addr;
    p.atomic_eth.rkey = r.rkey;
    p.atomic_eth.swap_add = cas ? r.swap : r.compare_add;
    p.atomic_eth.compare = cas ? r.compare_add : 0;
    p.bth.ack_req = true;
    return p;
  }
  const uint32_t n = psns_of(r);
  RocePacket p = header(base | row_of(r.opcode)->ops.at(i, n), r.dst_qpn, r.first_psn + i);
  p.xrceth.srqn = r.xrc_srqn;
  if (r.type == IBV_QPT_UD) p.deth = Deth{r.qkey, r.src_qpn & kMask24};
  if (i == 0 && !is_send(r.opcode)) p.reth = Reth{r.remote_addr, r.rkey, static_cast<uint32_t>(r.length)};
  if (i + 1 == n) {
    p.bth.se = r.solicited;
    p.bth.ack_req = r.type == IBV_QPT_RC || r.type == IBV_QPT_XRC_SEND;
    if (r.opcode == IBV_WR_SEND_WITH_INV)
      p.ieth = r.imm;
    else
      p.imm = ntohl(r.imm);
  }
  return p;
}

RocePacket ack_packet(uint32_t dst_qpn, uint32_t psn, uint8_t syndrome, uint32_t msn) {
  RocePacket p = header(kTransportRc | kAck, dst_qpn, psn);  // XRC answers as RC does
  p.aeth = Aeth{syndrome, msn & kMask24};
  return p;
}

RocePacket atomic_ack_packet(uint32_t dst_qpn, uint32_t psn, uint32_t msn, uint64_t original) {
  RocePacket p = header(kTransportRc | kAtomicAck, dst_qpn, psn);
  p.aeth = Aeth{aeth_ack(), msn & kMask24};
  p.atomic_ack = original;
  return p;
}

RocePacket read_response_packet(uint32_t dst_qpn, uint32_t read_psn, uint32_t i, uint32_t n, uint32_t msn) {
  RocePacket p = header(kTransportRc | kReadResponses.at(i, n), dst_qpn, read_psn + i);
  p.aeth = Aeth{aeth_ack(), msn & kMask24};
  return p;
}

}  // namespace sv::net
