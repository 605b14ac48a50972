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
#include "transport/roce_verdict.h"
#include "util/log.h"

namespace sv::roce {
namespace {

using namespace net;

// Where the message came from, as the receiver's GRH will say.
Destination source_of(const PacketAddrs& from) {
  Destination d;
  std::memcpy(d.sgid.raw, &from.src, 16);
  std::memcpy(d.dgid.raw, &from.dst, 16);
  d.traffic_class = from.traffic_class;
  d.hop_limit = from.hop_limit;
  d.slid = lid_of_gid(d.sgid, {}, 0);  // InfiniBand mode: another host's LID is its address's (core/lid.h)
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
  m.conn = nullptr;
  m.qp = nullptr;
  m.sq_pos = 0;
  return m;
}

PacketAddrs reply_to(const PacketAddrs& from) {
  PacketAddrs to = from;
  to.src = from.dst;
  to.dst = from.src;
  return to;
}

uint32_t responder_mtu(const TargetQp& t) {
  return t.path_mtu >= 256 && t.path_mtu <= 4096 ? t.path_mtu : 1024;
}

}  // namespace

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

void Engine::receive_reliable(const RocePacket& pkt, const PacketAddrs& from, const TargetQp& t) {
  const uint32_t qpn = t.qpn;
  if (std::memcmp(&from.src, t.dgid.raw, 16) != 0 || !from_peer_slot(from, t.dest_qpn)) {
    counters.add_device(kNoQp);  // not from its connected peer
    return;
  }
  auto [it, fresh] = receivers.try_emplace(qpn);
  Receiver& r = it->second;
  if (fresh) r.epsn = t.rq_psn;
  const OpcodeInfo* info = opcode_info(pkt.bth.opcode);
  const PacketAddrs to = reply_to(from);
  const uint32_t peer_qpn = t.dest_qpn, psn = pkt.bth.psn;
  const Destination d = source_of(from);
  const int order = psn_compare(psn, r.epsn);
  const bool read = info->is(kRead), atomic = info->is(kAtomic);

  if (order > 0) {  // a packet is missing: ask for it once
    if (!r.nak_sent) SV_DEBUG("QP %#x: PSN %#x while expecting %#x: sequence NAK", qpn, psn, r.epsn);
    if (!r.nak_sent) answer(qpn, to, peer_qpn, aeth_nak(NakCode::kPsnSequenceError), r.epsn, r.msn);
    r.nak_sent = true;
    return;
  }
  if (order < 0) counters.add(qpn, kDuplicates);
  if (order < 0 && !read) {  // a duplicate: our answer was lost
    SV_DEBUG("QP %#x: duplicate PSN %#x (expecting %#x)", qpn, psn, r.epsn);
    if (atomic) {
      for (const AtomicReplay& a : r.replays)
        if (a.valid && a.psn == psn) {
          transmit(kAnswers, qpn, to.src, to.dst, to.traffic_class, atomic_ack_packet(peer_qpn, psn, r.msn, a.original),
                   nullptr, 0);
        }
      return;
    }
    answer(qpn, to, peer_qpn, aeth_ack(), psn_add(r.epsn, kMask24), r.msn);  // everything before epsn arrived
    return;
  }
  if (order == 0) r.nak_sent = false;

  if (read) {
    const uint32_t len = pkt.reth.len, mtu = std::min(responder_mtu(t), link_mtu_to(from.src));
    if (order < 0) {
      // Repeated: only a READ this responder executed, still in its
      // resources, is answered again. A requester asks again from its
      // first missing response (a later PSN, the rest of the range), as rxe
      // finds it among its read resources.
      const ReadReplay* again = nullptr;
      for (const ReadReplay& rr : r.reads) {
        const uint32_t k = psn_sub(psn, rr.psn);
        if (rr.valid && k < rr.packets && rr.rkey == pkt.reth.rkey && pkt.reth.va >= rr.va &&
            uint64_t{pkt.reth.va} + len == rr.va + rr.len)
          again = &rr;
      }
      if (!again) {
        counters.add(qpn, kStaleReads);
        return;
      }
    } else if (len > limits::kMaxMsgSize) {
      answer(qpn, to, peer_qpn, aeth_nak(NakCode::kInvalidRequest), psn, r.msn);
      return;
    }
    // The whole range is checked first (rkey, bounds, access), with nothing
    // read; the bytes then go out a packet at a time: no buffer of the
    // length the packet claims is ever allocated.
    Message m = message_for(pkt, pkt, t, d);
    m.num_sink = 0;
    m.length = len;
    Response resp = targets_.respond(t, m);
    if (resp.outcome != Outcome::kAck) {
      if (is_error_verdict(resp.outcome)) answer(qpn, to, peer_qpn, nak_syndrome(resp.outcome), psn, r.msn);
      return;
    }
    const uint32_t n = packets_for(len, mtu);
    if (order == 0) {
      r.epsn = psn_add(psn, n);
      r.msn = psn_add(r.msn, 1);
      const uint32_t keep = std::clamp<uint32_t>(t.max_dest_rd_atomic, 1, kReadReplays);
      r.reads[r.next_read % keep] = ReadReplay{psn, n, pkt.reth.rkey, len, pkt.reth.va, true};
      r.next_read = (r.next_read + 1) % keep;
    }
    std::vector<uint8_t> chunk(std::min(mtu, len));
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t off = i * mtu, size = std::min(mtu, len - std::min(len, off));
      if (size) {
        Message part = message_for(pkt, pkt, t, d);
        Piece sink{chunk.data(), size};
        part.sink = &sink;
        part.num_sink = 1;
        part.remote_addr = pkt.reth.va + off;
        part.length = size;
        // Deregistered while being read: what was sent stays sent, the
        // rest is a remote access error, as on a NIC.
        if (Response rp = targets_.respond(t, part); rp.outcome != Outcome::kAck) {
          if (is_error_verdict(rp.outcome)) answer(qpn, to, peer_qpn, nak_syndrome(rp.outcome), psn_add(psn, i), r.msn);
          return;
        }
      }
      transmit(kAnswers, qpn, to.src, to.dst, to.traffic_class, read_response_packet(peer_qpn, psn, i, n, r.msn),
               chunk.data(), size);
    }
    return;
  }

  if (atomic) {
    uint64_t original = 0;
    Message m = message_for(pkt, pkt, t, d);
    Piece sink{reinterpret_cast<uint8_t*>(&original), 8};
    m.sink = &sink;
    m.num_sink = 1;
    Response resp = targets_.respond(t, m);
    if (resp.outcome != Outcome::kAck) {
      if (is_error_verdict(resp.outcome)) answer(qpn, to, peer_qpn, nak_syndrome(resp.outcome), psn, r.msn);
      return;
    }
    r.epsn = psn_add(psn, 1);
    r.msn = psn_add(r.msn, 1);
    r.replays[r.next_replay] = AtomicReplay{psn, original, true};
    r.next_replay = (r.next_replay + 1) % kAtomicReplays;
    transmit(kAnswers, qpn, to.src, to.dst, to.traffic_class, atomic_ack_packet(peer_qpn, psn, r.msn, original), nullptr,
             0);
    return;
  }

  // SEND or WRITE, packet by packet: a SEND is gathered until its last
  // packet (its receive WQE is taken then), a WRITE placed as it comes.
  const bool write = info->is(kWrite);
  if (info->starts_message()) {
    if (r.in_message) {  // the previous message never ended
      answer(qpn, to, peer_qpn, aeth_nak(NakCode::kInvalidRequest), psn, r.msn);
      return;
    }
    r.in_message = true;
    r.message_psn = psn;
    r.first = pkt;
    r.bytes.clear();
    r.placed = 0;
  } else if (!r.in_message || opcode_info(r.first.bth.opcode)->is(kWrite) != write) {
    answer(qpn, to, peer_qpn, aeth_nak(NakCode::kInvalidRequest), psn, r.msn);
    return;
  }
  const uint64_t so_far = write ? r.placed : r.bytes.size();
  if (so_far + pkt.payload_len > (write ? uint64_t{r.first.reth.len} : limits::kMaxMsgSize)) {
    r.in_message = false;
    answer(qpn, to, peer_qpn, aeth_nak(NakCode::kInvalidRequest), psn, r.msn);
    return;
  }
  Response resp{Outcome::kAck, 0};
  if (write && pkt.payload_len) {
    Message m = message_for(r.first, pkt, t, d);
    m.length = r.first.reth.len;
    resp = targets_.place_write(t, m, r.placed, pkt.payload, static_cast<uint32_t>(pkt.payload_len));
    r.placed += pkt.payload_len;
  } else if (!write) {
    r.bytes.insert(r.bytes.end(), pkt.payload, pkt.payload + pkt.payload_len);
  }
  if (resp.outcome == Outcome::kAck) {
    r.epsn = psn_add(psn, 1);
    if (!info->ends_message()) {
      if (pkt.bth.ack_req) answer(qpn, to, peer_qpn, aeth_ack(), psn, r.msn);
      return;
    }
    r.in_message = false;
    Message m = message_for(r.first, pkt, t, d);
    Piece piece{r.bytes.data(), static_cast<uint32_t>(r.bytes.size())};
    m.pieces = &piece;
    m.num_pieces = r.bytes.empty() ? 0 : 1;
    m.length = write ? r.placed : r.bytes.size();
    resp = Response{Outcome::kRemoteInvalid, 0};
    if (!write || r.first.reth.len == r.placed) resp = targets_.respond(t, m);
  } else {
    r.in_message = false;  // a placement failed: the message goes no further
  }
  switch (resp.outcome) {
    case Outcome::kAck:
      r.msn = psn_add(r.msn, 1);
      answer(qpn, to, peer_qpn, aeth_ack(), psn, r.msn);
      return;
    case Outcome::kRnr:  // the whole message comes again, from its first PSN
      r.epsn = r.message_psn;
      answer(qpn, to, peer_qpn, aeth_rnr_nak(resp.rnr_timer), r.message_psn, r.msn);
      return;
    case Outcome::kRemoteAccess:
    case Outcome::kRemoteInvalid:
    case Outcome::kRemoteOperational:
      answer(qpn, to, peer_qpn, nak_syndrome(resp.outcome), psn, r.msn);
      return;
    default:  // the QP cannot take it (not ready, not connected): as if it never came
      r.epsn = r.message_psn;
      return;
  }
}

}  // namespace sv::roce
