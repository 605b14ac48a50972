// The responder side of RoCEv2: packets addressed to a QP of this host are
// checked against its expected PSN (duplicates re-acknowledged, READs
// re-executed, atomics replayed from the saved result; a gap draws one
// sequence-error NAK), reassembled into the whole message, and executed by
// the same respond() the shared-memory path runs (core/responder.h), whose
// verdict goes back as an ACK, an RNR NAK, a NAK, READ response packets or
// an atomic acknowledgement.
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "core/lid.h"
#include "core/limits.h"
#include "net/roce_packetiser.h"
#include "net/udp_sport.h"
#include "transport/roce_engine.h"
#include "transport/roce_inbound.h"
#include "transport/roce_verdict.h"
#include "util/knobs.h"
#include "util/log.h"

namespace sv::roce {
using namespace net;

// Where the message came from, as the receiver's GRH will say.
Destination source_of(const PacketAddrs& from) {
  Destination d;
  std::memcpy(d.sgid.raw, &from.src, 16);
  std::memcpy(d.dgid.raw, &from.dst, 16);
  d.traffic_class = from.traffic_class;
  d.hop_limit = from.hop_limit;
  // InfiniBand mode: another host's LID is its address's (core/lid.h).
  // (Only there: on Ethernet a completion has no SLID, and this runs for
  // every packet a responder takes.)
  if (knobs().infiniband) d.slid = lid_of_gid(d.sgid, {}, 0);
  return d;
}

// The Message the NIC model executes for `pkt` (the last packet, or the
// only one), with `first` the packet that started it.
Message message_for(const RocePacket& first, const RocePacket& pkt, const TargetQp& t, const Destination& d) {
  Message m;
  m.qp_type = qp_type_of(pkt.bth.opcode);
  m.opcode = wr_opcode_of(pkt.bth.opcode);
  m.src_qpn = m.qp_type == IBV_QPT_UD ? pkt.deth.src_qp : t.dest_qpn;  // RC/UC: the connection is the sender
  m.dst_qpn = t.qpn;
  m.qkey = pkt.deth.qkey;
  m.imm = m.opcode == IBV_WR_SEND_WITH_INV ? pkt.ieth : htonl(pkt.imm);
  m.xrc_srqn = first.xrceth.srqn;
  m.solicited = pkt.bth.se;
  m.block_self_mcast = false;
  m.dst = &d;
  m.pieces = m.sink = nullptr;
  m.num_pieces = m.num_sink = 0;
  m.pieces_are_app_memory = false;
  m.length = 0;
  m.remote_addr = first.reth.va;
  m.rkey = first.reth.rkey;
  m.compare_add = m.swap = 0;
  if (m.opcode == IBV_WR_ATOMIC_CMP_AND_SWP || m.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
    m.remote_addr = first.atomic_eth.va;
    m.rkey = first.atomic_eth.rkey;
    m.compare_add = m.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? first.atomic_eth.compare : first.atomic_eth.swap_add;
    m.swap = first.atomic_eth.swap_add;
    m.length = 8;
  }
  m.token = 0;
  return m;
}

PacketAddrs reply_to(const PacketAddrs& from) {
  PacketAddrs to = from;
  to.src = from.dst;
  to.dst = from.src;
  return to;
}


void Engine::answer(uint32_t qpn, const PacketAddrs& to, uint32_t dst_qpn, uint8_t syndrome, uint32_t psn,
                    uint32_t msn) {
  if (aeth_type(syndrome) == AethType::kRnrNak) counters.add(qpn, kRnrNaksSent);
  if (aeth_type(syndrome) == AethType::kNak)
    counters.add(qpn, static_cast<NakCode>(aeth_value(syndrome)) == NakCode::kPsnSequenceError ? kSeqNaksSent
                                                                                              : kErrorNaksSent);
  transmit(kAnswers, qpn, to.src, to.dst, to.traffic_class, ack_packet(dst_qpn, psn, syndrome, msn), nullptr, 0);
}

// Whether an opcode is of the QP's own transport: rxe's header check drops
// any other (a UC SEND to an RC QP reset its expected PSN: one forged
// packet broke the connection).
bool opcode_fits(uint8_t opcode, uint32_t qp_type) {
  switch (opcode & kTransportMask) {
    case kTransportRc:
      return qp_type == IBV_QPT_RC;
    case kTransportUc:
      return qp_type == IBV_QPT_UC;
    case kTransportUd:
      return qp_type == IBV_QPT_UD;
    case kTransportXrc:
      return qp_type == IBV_QPT_XRC_RECV;
    default:
      return false;
  }
}

void Engine::receive(const RocePacket& pkt, const PacketAddrs& from, size_t len) {
  // The QP's own row counts it once the QP is found (count_received): a
  // forged DestQP must not claim one.
  counters.add_device(kPacketsReceived);
  counters.add_device(kBytesReceived, len);
  if (opcode_info(pkt.bth.opcode)->is(kResponse))
    on_response(pkt, from);
  else
    on_request(pkt, from);
}

void Engine::on_request(const RocePacket& pkt, const PacketAddrs& from) {
  const uint32_t qpn = pkt.bth.dest_qp;
  TargetQp t;
  if (!targets_.find(qpn, &t)) {
    counters.add_device(kNoQp);
    return;
  }
  count_received(qpn, pkt);
  // The QP's transport, not the packet's, says how a packet is taken.
  if (!opcode_fits(pkt.bth.opcode, t.type)) {
    counters.add(qpn, kWrongTransport);
    return;
  }
  if (t.type == IBV_QPT_UC || t.type == IBV_QPT_UD)
    receive_unreliable(pkt, from, t);
  else
    receive_reliable(pkt, from, t);
}

void Engine::count_received(uint32_t qpn, const RocePacket& pkt) {
  counters.add_qp(qpn, kPacketsReceived);
  // The datagram's length, as decode() took it apart.
  counters.add_qp(qpn, kBytesReceived,
                  opcode_info(pkt.bth.opcode)->header_bytes + pkt.payload_len + pkt.bth.pad + kIcrcBytes);
}

void Engine::on_group_request(const RocePacket& pkt, const PacketAddrs& from, uint32_t qpn) {
  TargetQp t;
  if (!targets_.find(qpn, &t)) {
    counters.add_device(kNoQp);
    return;
  }
  receive_unreliable(pkt, from, t);
}

void Engine::receive_unreliable(const RocePacket& pkt, const PacketAddrs& from, const TargetQp& t) {
  const uint32_t qpn = t.qpn;
  const Destination d = source_of(from);
  const OpcodeInfo* info = opcode_info(pkt.bth.opcode);
  if (qp_type_of(pkt.bth.opcode) == IBV_QPT_UD) {
    if (!info->is(kOnly)) return;
    Message m = message_for(pkt, pkt, t, d);
    Piece piece{const_cast<uint8_t*>(pkt.payload), static_cast<uint32_t>(pkt.payload_len)};
    m.pieces = &piece;
    m.num_pieces = 1;
    m.length = pkt.payload_len;
    targets_.respond(t, m);
    return;
  }
  // UC: a message missing a packet is dropped whole, as the wire loses it.
  if (std::memcmp(&from.src, t.dgid.raw, 16) != 0 || !from_peer_slot(from, t.dest_qpn)) return;
  auto [it, fresh] = receivers.try_emplace(qpn);
  Receiver& r = it->second;
  if (info->starts_message()) {
    r.in_message = true;
    r.first = pkt;
    r.bytes.clear();
  } else if (!r.in_message || pkt.bth.psn != r.epsn) {
    r.in_message = false;
    return;
  }
  r.epsn = psn_add(pkt.bth.psn, 1);
  r.bytes.insert(r.bytes.end(), pkt.payload, pkt.payload + pkt.payload_len);
  if (!info->ends_message()) return;
  r.in_message = false;
  Message m = message_for(r.first, pkt, t, d);
  Piece piece{r.bytes.data(), static_cast<uint32_t>(r.bytes.size())};
  m.pieces = &piece;
  m.num_pieces = 1;
  m.length = r.bytes.size();
  targets_.respond(t, m);
}

}  // namespace sv::roce
