// Work requests to RoCEv2 packets and back: the one place that says which
// opcodes, PSNs and extension headers a message's packets carry, and what
// work request a packet was. The network requester (transport/
// roce_sender.cpp), the responder (roce_receiver.cpp) and the intra-host
// capture (shm_capture.cpp, which shows shared-memory traffic as the wire
// would carry it) all build their packets here, so the capture cannot drift
// from the wire.
//
// Beside roce_opcode.h, which says what each opcode's headers are, this says
// which opcode each packet of a work request gets (IBTA vol 1, 9.4; Linux
// rxe_req.c next_opcode() and rxe_resp.c). Pure functions of their arguments.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

#include "net/roce_header.h"

namespace sv::net {

// The transport base (opcode's top 3 bits) a QP type's requests use.
uint8_t transport_base(ibv_qp_type t);
// The requester's QP type a packet's opcode belongs to (XRC: XRC_SEND).
ibv_qp_type qp_type_of(uint8_t opcode);
// The work request a message's last (or only) packet says it was; SEND for
// opcodes that name none (responses).
ibv_wr_opcode wr_opcode_of(uint8_t opcode);

inline bool is_send(ibv_wr_opcode op) {
  return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_SEND_WITH_INV;
}
inline bool is_atomic(ibv_wr_opcode op) {
  return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD;
}
// READ and atomics are answered with data, SEND and WRITE with an ACK.
inline bool asks_data(ibv_wr_opcode op) { return op == IBV_WR_RDMA_READ || is_atomic(op); }

// A path MTU attribute in bytes (an invalid one: 1024, the default).
inline uint32_t mtu_bytes(ibv_mtu m) { return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128u << m : 1024; }

// How a message of `length` bytes is cut at `mtu`: at least one packet (a
// zero-length message is one empty packet); packet i starts at i * mtu.
inline uint32_t packets_for(uint64_t length, uint32_t mtu) {
  return length == 0 ? 1 : static_cast<uint32_t>((length + mtu - 1) / mtu);
}
inline uint64_t packet_offset(uint32_t i, uint32_t mtu) { return uint64_t{i} * mtu; }
inline size_t packet_size(uint64_t length, uint32_t i, uint32_t mtu) {
  const uint64_t off = packet_offset(i, mtu);
  return off >= length ? 0 : static_cast<size_t>(length - off < mtu ? length - off : mtu);
}

// One message as the requester puts it on the wire.
struct Request {
  ibv_qp_type type = IBV_QPT_RC;
  ibv_wr_opcode opcode = IBV_WR_SEND;
  uint32_t src_qpn = 0, dst_qpn = 0;
  uint32_t qkey = 0;      // UD
  uint32_t xrc_srqn = 0;  // XRC
  uint32_t imm = 0;       // network order, as ibv_send_wr has it; SEND_WITH_INV: the rkey
  bool solicited = false;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  uint64_t compare_add = 0, swap = 0;  // atomics, as ibv_send_wr names them
  uint64_t length = 0;
  uint32_t mtu = 1024;
  uint32_t first_psn = 0;
};

// The PSNs a message uses: one per packet of a SEND/WRITE, one per READ
// response, one for an atomic.
inline uint32_t psns_of(const Request& r) { return is_atomic(r.opcode) ? 1 : packets_for(r.length, r.mtu); }

// The headers of packet `i` (< psns_of(r)) of a SEND or WRITE: its opcode
// and PSN, RETH on the first packet of a WRITE, ImmDt or IETH and SE on
// the last, DETH for UD, XRCETH for XRC, AckReq on the last of a reliable
// QP's message. Of a READ: the request asking for the responses from the
// i-th on (0: the whole READ; more when it is asked again after a lost
// response). Of an atomic: its one request (i = 0).
RocePacket request_packet(const Request& r, uint32_t i);

// The responder's answers.
RocePacket ack_packet(uint32_t dst_qpn, uint32_t psn, uint8_t syndrome, uint32_t msn);
RocePacket atomic_ack_packet(uint32_t dst_qpn, uint32_t psn, uint32_t msn, uint64_t original);
// Response packet `i` of `n` to the READ with PSN `read_psn`.
RocePacket read_response_packet(uint32_t dst_qpn, uint32_t read_psn, uint32_t i, uint32_t n, uint32_t msn);

}  // namespace sv::net
