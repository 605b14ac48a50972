// The requester side of RoCEv2 (IBTA vol 1, 9.5-9.7): a work request becomes
// packets with consecutive PSNs; an RC message stays on the wire until the
// responder acknowledged its last PSN, is resent from the first
// unacknowledged PSN (go-back-N) on a sequence-error NAK or when the ACK
// timer (4.096 us x 2^timeout) fires, at most retry_cnt times, and ends with
// the responder's verdict, handed back to the QP's requester
// (core/requester.h answer_from_network).
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "core/qp.h"
#include "net/roce_datagram.h"
#include "net/udp_sport.h"
#include "transport/roce_engine.h"
#include "util/clock.h"
#include "util/log.h"

namespace sv::roce {
namespace {

using namespace net;

constexpr uint64_t kForeverRetryNs = 100'000'000;  // timeout 0: no limit, but lost packets still go again

uint8_t transport_base(ibv_qp_type t) {
  switch (t) {
    case IBV_QPT_UC:
      return kTransportUc;
    case IBV_QPT_UD:
      return kTransportUd;
    case IBV_QPT_XRC_SEND:
      return kTransportXrc;
    default:
      return kTransportRc;
  }
}

// The QP's path MTU, no larger than what the link carries (rxe clamps it the
// same way, to its port's MTU, which follows the netdev's).
uint32_t path_mtu_bytes(const Qp* qp, Sender& s, const in6_addr& dst) {
  if (!s.link_mtu) s.link_mtu = link_ib_mtu(dst);
  ibv_mtu m = qp->attr.path_mtu;
  uint32_t mtu = (m >= IBV_MTU_256 && m <= IBV_MTU_4096) ? 128u << m : 1024;
  return std::min(mtu, s.link_mtu);
}

uint64_t ack_timeout_ns(uint8_t timeout) { return 4096ull << (timeout & 31); }

uint32_t packets_for(uint64_t length, uint32_t mtu) {
  return length == 0 ? 1 : static_cast<uint32_t>((length + mtu - 1) / mtu);
}

bool is_send(ibv_wr_opcode op) {
  return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_SEND_WITH_INV;
}
bool is_atomic(ibv_wr_opcode op) { return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD; }

// The operation of packet `i` of `n` of a SEND or WRITE.
uint8_t data_operation(ibv_wr_opcode op, uint32_t i, uint32_t n) {
  const bool first = i == 0, last = i + 1 == n;
  if (is_send(op)) {
    if (first && last)
      return op == IBV_WR_SEND_WITH_IMM ? kSendOnlyImm : op == IBV_WR_SEND_WITH_INV ? kSendOnlyInv : kSendOnly;
    if (first) return kSendFirst;
    if (!last) return kSendMiddle;
    return op == IBV_WR_SEND_WITH_IMM ? kSendLastImm : op == IBV_WR_SEND_WITH_INV ? kSendLastInv : kSendLast;
  }
  const bool imm = op == IBV_WR_RDMA_WRITE_WITH_IMM;
  if (first && last) return imm ? kWriteOnlyImm : kWriteOnly;
  if (first) return kWriteFirst;
  if (!last) return kWriteMiddle;
  return imm ? kWriteLastImm : kWriteLast;
}

void gather(const Message& m, std::vector<uint8_t>* out) {
  out->clear();
  out->reserve(m.length);
  for (uint32_t i = 0; i < m.num_pieces; ++i) out->insert(out->end(), m.pieces[i].addr, m.pieces[i].addr + m.pieces[i].len);
}

RocePacket header(uint8_t opcode, uint32_t dst_qpn, uint32_t psn) {
  RocePacket p;
  p.bth.opcode = opcode;
  p.bth.dest_qp = dst_qpn;
  p.bth.psn = psn & kMask24;
  return p;
}

// Where packet `i` of a SEND/WRITE message of `length` bytes starts, and its size.
uint64_t packet_offset(uint32_t i, uint32_t mtu) { return uint64_t{i} * mtu; }
size_t packet_size(uint64_t length, uint32_t i, uint32_t mtu) {
  uint64_t off = packet_offset(i, mtu);
  return off >= length ? 0 : static_cast<size_t>(std::min<uint64_t>(mtu, length - off));
}

}  // namespace

bool Engine::transmit(const in6_addr& src, const in6_addr& dst, uint8_t traffic_class, const RocePacket& pkt,
                      const uint8_t* payload, size_t len) {
  thread_local std::vector<uint8_t> buf;
  buf.resize(kDatagramHeadroom + kDatagramOverhead + len);
  DatagramAddrs a;
  a.src_ip = src;
  a.dst_ip = dst;
  a.src_port = sock.source_port(dst);
  a.dst_port = kRoceUdpPort;
  size_t n = build_datagram(a, pkt, payload, len, buf.data());
  if (!n) return false;
  if (!sock.send(src, dst, kRoceUdpPort, traffic_class, buf.data() + kDatagramHeadroom, n)) {
    SV_DEBUG("RoCEv2 packet to QP %#x not sent: %s", pkt.bth.dest_qp, strerror(errno));
    return false;
  }
  return true;
}

Response Engine::send_unreliable(const Message& m) {
  auto [it, fresh] = senders.try_emplace(m.src_qpn);
  Sender& s = it->second;
  if (fresh) s.next_psn = m.qp->attr.sq_psn;
  thread_local std::vector<uint8_t> data;
  gather(m, &data);
  const uint8_t base = transport_base(m.qp_type);
  if (m.qp_type == IBV_QPT_UD) {
    RocePacket p = header(base | (m.opcode == IBV_WR_SEND_WITH_IMM ? kSendOnlyImm : kSendOnly), m.dst_qpn, s.next_psn);
    s.next_psn = psn_add(s.next_psn, 1);
    p.bth.se = m.solicited;
    p.deth.qkey = m.qkey;
    p.deth.src_qp = m.src_qpn;
    p.imm = ntohl(m.imm);
    transmit(as_in6(m.dst->sgid), as_in6(m.dst->dgid), m.dst->traffic_class, p, data.data(), data.size());
    return Response{Outcome::kAck, 0};
  }
  // UC: the whole message at once; nothing comes back.
  const uint32_t mtu = path_mtu_bytes(m.qp, s, as_in6(m.dst->dgid)), n = packets_for(m.length, mtu);
  for (uint32_t i = 0; i < n; ++i) {
    RocePacket p = header(base | data_operation(m.opcode, i, n), m.dst_qpn, psn_add(s.next_psn, i));
    if (i == 0 && !is_send(m.opcode)) p.reth = Reth{m.remote_addr, m.rkey, static_cast<uint32_t>(m.length)};
    if (i + 1 == n) {
      p.bth.se = m.solicited;
      p.imm = ntohl(m.imm);
    }
    transmit(as_in6(m.dst->sgid), as_in6(m.dst->dgid), m.dst->traffic_class, p, data.data() + packet_offset(i, mtu), packet_size(m.length, i, mtu));
  }
  s.next_psn = psn_add(s.next_psn, n);
  return Response{Outcome::kAck, 0};
}

Response Engine::start_reliable(const Message& m) {
  auto [it, fresh] = senders.try_emplace(m.src_qpn);
  Sender& s = it->second;
  if (fresh) s.next_psn = m.qp->attr.sq_psn;
  Outbound& o = s.out;
  o.qp = m.qp;
  o.pos = m.qp->sq_exec;
  o.dst = *m.dst;
  o.type = m.qp_type;
  o.opcode = m.opcode;
  o.src_qpn = m.src_qpn;
  o.dst_qpn = m.dst_qpn;
  o.xrc_srqn = m.xrc_srqn;
  o.imm = m.imm;
  o.solicited = m.solicited;
  o.remote_addr = m.remote_addr;
  o.compare_add = m.compare_add;
  o.swap = m.swap;
  o.rkey = m.rkey;
  o.length = m.length;
  o.sink.assign(m.sink, m.sink + m.num_sink);
  o.mtu = path_mtu_bytes(m.qp, s, as_in6(m.dst->dgid));
  if (m.opcode == IBV_WR_RDMA_READ) {
    o.data.assign(m.length, 0);
    o.npsn = packets_for(m.length, o.mtu);
  } else if (is_atomic(m.opcode)) {
    o.data.clear();
    o.npsn = 1;
  } else {
    gather(m, &o.data);
    o.npsn = packets_for(m.length, o.mtu);
  }
  o.first_psn = s.next_psn;
  o.sent = o.acked = 0;
  o.timeout = m.qp->attr.timeout;
  o.retry_left = m.qp->attr.retry_cnt;
  o.deadline_ns = monotonic_ns() + (o.timeout ? ack_timeout_ns(o.timeout) : kForeverRetryNs);
  s.active = true;
  pump(o);
  return Response{Outcome::kPending, 0};
}

void Engine::request_read(Outbound& o) {
  const uint64_t done = std::min<uint64_t>(packet_offset(o.acked, o.mtu), o.length);
  RocePacket p = header(transport_base(o.type) | kReadRequest, o.dst_qpn, psn_add(o.first_psn, o.acked));
  p.xrceth.srqn = o.xrc_srqn;
  p.reth = Reth{o.remote_addr + done, o.rkey, static_cast<uint32_t>(o.length - done)};
  p.bth.ack_req = true;
  transmit(as_in6(o.dst.sgid), as_in6(o.dst.dgid), o.dst.traffic_class, p, nullptr, 0);
  o.sent = o.npsn;
}

void Engine::send_packet(Outbound& o, uint32_t i) {
  const uint8_t base = transport_base(o.type);
  const in6_addr& src = as_in6(o.dst.sgid);
  const in6_addr& dst = as_in6(o.dst.dgid);
  if (is_atomic(o.opcode)) {
    RocePacket p = header(base | (o.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? kCompareSwap : kFetchAdd), o.dst_qpn,
                          o.first_psn);
    p.xrceth.srqn = o.xrc_srqn;
    p.atomic_eth.va = o.remote_addr;
    p.atomic_eth.rkey = o.rkey;
    p.atomic_eth.swap_add = o.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? o.swap : o.compare_add;
    p.atomic_eth.compare = o.opcode == IBV_WR_ATOMIC_CMP_AND_SWP ? o.compare_add : 0;
    p.bth.ack_req = true;
    transmit(src, dst, o.dst.traffic_class, p, nullptr, 0);
    return;
  }
  const bool last = i + 1 == o.npsn;
  RocePacket p = header(base | data_operation(o.opcode, i, o.npsn), o.dst_qpn, psn_add(o.first_psn, i));
  p.xrceth.srqn = o.xrc_srqn;
  if (i == 0 && !is_send(o.opcode)) p.reth = Reth{o.remote_addr, o.rkey, static_cast<uint32_t>(o.length)};
  if (last) {
    p.bth.se = o.solicited;
    if (o.opcode == IBV_WR_SEND_WITH_INV)
      p.ieth = o.imm;
    else
      p.imm = ntohl(o.imm);
  }
  p.bth.ack_req = last || (i + 1) % kAckRequestEvery == 0;
  transmit(src, dst, o.dst.traffic_class, p, o.data.data() + packet_offset(i, o.mtu), packet_size(o.length, i, o.mtu));
}

void Engine::pump(Outbound& o) {
  if (o.opcode == IBV_WR_RDMA_READ) {
    if (o.sent == 0) request_read(o);
    return;
  }
  if (is_atomic(o.opcode)) {
    if (o.sent == 0) {
      send_packet(o, 0);
      o.sent = 1;
    }
    return;
  }
  while (o.sent < o.npsn && o.sent - o.acked < kWindowPackets) send_packet(o, o.sent++);
}

void Engine::go_back(Outbound& o, uint32_t index) {
  o.acked = std::max(o.acked, index);
  o.sent = o.acked;
  if (o.opcode == IBV_WR_RDMA_READ || is_atomic(o.opcode)) o.sent = 0;
  pump(o);
}

void Engine::finish(Sender& s, Response r) {
  Outbound& o = s.out;
  s.active = false;
  // A message that ended without reaching the responder (RNR, no answer) is
  // sent again with the same PSNs; after an error the QP is done anyway.
  if (r.outcome != Outcome::kRnr && r.outcome != Outcome::kRetryExceeded) s.next_psn = psn_add(o.first_psn, o.npsn);
  answers.push_back(Answer{o.qp, o.src_qpn, o.pos, r});
}

void Engine::on_response(const RocePacket& pkt, const PacketAddrs&) {
  auto it = senders.find(pkt.bth.dest_qp);
  if (it == senders.end() || !it->second.active) return;  // nothing in flight: a late duplicate
  Sender& s = it->second;
  Outbound& o = s.out;
  const uint32_t i = (pkt.bth.psn - o.first_psn) & kMask24;  // distance on the PSN circle
  if (i >= o.npsn) return;  // about another message
  const OpcodeInfo* info = opcode_info(pkt.bth.opcode);
  const uint64_t refreshed = monotonic_ns() + (o.timeout ? ack_timeout_ns(o.timeout) : kForeverRetryNs);
  if (info->is(kAckOp)) {
    const uint8_t syn = pkt.aeth.syndrome;
    switch (aeth_type(syn)) {
      case AethType::kAck:
        if (o.opcode == IBV_WR_RDMA_READ || is_atomic(o.opcode)) return;  // their answer carries data
        if (i + 1 > o.acked) {
          o.acked = i + 1;
          o.deadline_ns = refreshed;
          o.retry_left = o.qp ? o.qp->attr.retry_cnt : o.retry_left;
        }
        if (o.acked == o.npsn) return finish(s, Response{Outcome::kAck, 0});
        return pump(o);
      case AethType::kRnrNak:
        return finish(s, Response{Outcome::kRnr, aeth_value(syn)});
      case AethType::kNak:
        switch (static_cast<NakCode>(aeth_value(syn))) {
          case NakCode::kPsnSequenceError:
            o.deadline_ns = refreshed;
            return go_back(o, i);
          case NakCode::kRemoteAccessError:
            return finish(s, Response{Outcome::kRemoteAccess, 0});
          case NakCode::kRemoteOperationalError:
            return finish(s, Response{Outcome::kRemoteOperational, 0});
          default:
            return finish(s, Response{Outcome::kRemoteInvalid, 0});
        }
      default:
        return;
    }
  }
  if (info->is(kRead) && info->is(kResponse)) {
    if (o.opcode != IBV_WR_RDMA_READ || i != o.acked) return;  // out of order: the timer re-asks
    const uint64_t at = packet_offset(i, o.mtu);
    if (pkt.payload_len > o.mtu || at + pkt.payload_len > o.length) return;
    std::memcpy(o.data.data() + at, pkt.payload, pkt.payload_len);
    ++o.acked;
    o.deadline_ns = refreshed;
    if (o.acked < o.npsn) return;
    size_t off = 0;
    for (const Piece& piece : o.sink) {
      std::memcpy(piece.addr, o.data.data() + off, piece.len);
      off += piece.len;
    }
    return finish(s, Response{Outcome::kAck, 0});
  }
  if (info->is(kAtomic) && info->is(kResponse)) {
    if (!is_atomic(o.opcode)) return;
    const auto* bytes = reinterpret_cast<const uint8_t*>(&pkt.atomic_ack);
    uint32_t done = 0;
    for (const Piece& piece : o.sink) {
      uint32_t n = std::min<uint32_t>(piece.len, 8 - done);
      std::memcpy(piece.addr, bytes + done, n);
      done += n;
      if (done == 8) break;
    }
    return finish(s, Response{Outcome::kAck, 0});
  }
}

void Engine::on_timers(uint64_t now) {
  for (auto& [qpn, s] : senders) {
    if (!s.active || s.out.deadline_ns > now) continue;
    Outbound& o = s.out;
    if (o.timeout == 0) {
      o.deadline_ns = now + kForeverRetryNs;
      go_back(o, o.acked);
      continue;
    }
    if (o.retry_left == 0) {
      SV_INFO("QP %#x: no ACK for PSN %#x after %u retries", qpn, psn_add(o.first_psn, o.acked),
              o.qp ? o.qp->attr.retry_cnt : 0);
      finish(s, Response{Outcome::kRetryExceeded, 0});
      continue;
    }
    --o.retry_left;
    o.deadline_ns = now + ack_timeout_ns(o.timeout);
    go_back(o, o.acked);
  }
}

uint64_t Engine::next_deadline() const {
  uint64_t best = 0;
  for (const auto& [qpn, s] : senders)
    if (s.active && (best == 0 || s.out.deadline_ns < best)) best = s.out.deadline_ns;
  return best;
}

}  // namespace sv::roce
