#include "transport/shm_capture.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/pd.h"
#include "core/qp.h"
#include "net/roce_header.h"
#include "net/udp_sport.h"
#include "transport/roce_capture.h"

namespace sv::roce {
namespace {

using namespace net;

// What the capture remembers of a requester QP: where its PSNs are, and the
// MSN its responder has reached. Reset when the QP number names another QP
// (or the same one was given another sq_psn or peer).
struct Flow {
  const Qp* qp = nullptr;
  uint32_t sq_psn = 0;  // the attribute the PSNs started from
  uint32_t dst_qpn = 0;
  uint32_t next_psn = 0;
  uint32_t msn = 0;
};

std::mutex g_mu;
std::unordered_map<uint32_t, Flow>& flows() {
  static auto* f = new std::unordered_map<uint32_t, Flow>();  // never destroyed: messages may flow until exit
  return *f;
}

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

bool is_send(ibv_wr_opcode op) {
  return op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_SEND_WITH_INV;
}
bool is_atomic(ibv_wr_opcode op) { return op == IBV_WR_ATOMIC_CMP_AND_SWP || op == IBV_WR_ATOMIC_FETCH_AND_ADD; }

// The operation of packet `i` of `n` of a SEND or WRITE (as roce_sender.cpp).
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

// The requester QP's path MTU (a UD message is one packet of at most the port MTU).
uint32_t mtu_bytes(const Message& m) {
  if (m.qp_type == IBV_QPT_UD || !m.qp) return 4096;
  const ibv_mtu v = m.qp->attr.path_mtu;
  return v >= IBV_MTU_256 && v <= IBV_MTU_4096 ? 128u << v : 1024;
}

uint32_t packets_for(uint64_t length, uint32_t mtu) {
  return length == 0 ? 1 : static_cast<uint32_t>((length + mtu - 1) / mtu);
}

size_t packet_size(uint64_t length, uint32_t i, uint32_t mtu) {
  const uint64_t off = uint64_t{i} * mtu;
  return off >= length ? 0 : static_cast<size_t>(std::min<uint64_t>(mtu, length - off));
}

// The bytes of `n` pieces, `limit` at most, in one buffer.
void gather(const Piece* pieces, uint32_t n, uint64_t limit, std::vector<uint8_t>* out) {
  out->clear();
  for (uint32_t i = 0; i < n && out->size() < limit; ++i) {
    const size_t take = std::min<uint64_t>(pieces[i].len, limit - out->size());
    out->insert(out->end(), pieces[i].addr, pieces[i].addr + take);
  }
}

RocePacket header(uint8_t opcode, uint32_t dst_qpn, uint32_t psn) {
  RocePacket p;
  p.bth.opcode = opcode;
  p.bth.dest_qp = dst_qpn & kMask24;
  p.bth.psn = psn & kMask24;
  return p;
}

uint8_t nak_for(Outcome o) {
  switch (o) {
    case Outcome::kRemoteAccess:
      return aeth_nak(NakCode::kRemoteAccessError);
    case Outcome::kRemoteOperational:
      return aeth_nak(NakCode::kRemoteOperationalError);
    default:
      return aeth_nak(NakCode::kInvalidRequest);
  }
}

}  // namespace

void exchange_packets(const Message& m, Response r, uint32_t psn, uint32_t msn, uint32_t mtu,
                      const std::function<void(const ExchangePacket&)>& out) {
  const bool reliable = is_reliable(m.qp_type);
  const bool read = m.opcode == IBV_WR_RDMA_READ, atomic = is_atomic(m.opcode);
  const uint32_t npsn = atomic ? 1 : packets_for(m.length, mtu);

  // The two ends as the wire shows them.
  ExchangePacket req, resp;
  std::memcpy(&req.src, m.dst->sgid.raw, 16);
  std::memcpy(&req.dst, m.dst->dgid.raw, 16);
  req.traffic_class = m.dst->traffic_class;
  resp = req;
  resp.response = true;
  std::swap(resp.src, resp.dst);
  if (m.qp_type == IBV_QPT_UD) {
    req.src_port = ud_udp_sport(m.src_qpn);
  } else {
    req.src_port = rc_udp_sport(m.dst->flow_label, m.src_qpn, m.dst_qpn);
    resp.src_port = rc_udp_sport(m.dst->flow_label, m.dst_qpn, m.src_qpn);
  }
  auto emit = [&](ExchangePacket& e, const RocePacket& p, const uint8_t* data, size_t len) {
    e.pkt = p;
    e.payload = data;
    e.len = len;
    out(e);
  };

  const uint8_t base = transport_base(m.qp_type);
  thread_local std::vector<uint8_t> data;

  // The request.
  if (read) {
    RocePacket p = header(base | kReadRequest, m.dst_qpn, psn);
    p.xrceth.srqn = m.xrc_srqn;
    p.reth = Reth{m.remote_addr, m.rkey, static_cast<uint32_t>(m.length)};
    p.bth.ack_req = true;
    emit(req, p, nullptr, 0);
  } else if (atomic) {
    const bool cas = m.opcode == IBV_WR_ATOMIC_CMP_AND_SWP;
    RocePacket p = header(base | (cas ? kCompareSwap : kFetchAdd), m.dst_qpn, psn);
    p.xrceth.srqn = m.xrc_srqn;
    p.atomic_eth.va = m.remote_addr;
    p.atomic_eth.rkey = m.rkey;
    p.atomic_eth.swap_add = cas ? m.swap : m.compare_add;
    p.atomic_eth.compare = cas ? m.compare_add : 0;
    p.bth.ack_req = true;
    emit(req, p, nullptr, 0);
  } else {
    gather(m.pieces, m.num_pieces, m.length, &data);
    for (uint32_t i = 0; i < npsn; ++i) {
      RocePacket p = header(base | data_operation(m.opcode, i, npsn), m.dst_qpn, psn_add(psn, i));
      p.xrceth.srqn = m.xrc_srqn;
      p.deth = Deth{m.qkey, m.src_qpn & kMask24};
      if (i == 0 && !is_send(m.opcode)) p.reth = Reth{m.remote_addr, m.rkey, static_cast<uint32_t>(m.length)};
      if (i + 1 == npsn) {
        p.bth.se = m.solicited;
        p.bth.ack_req = reliable;
        if (m.opcode == IBV_WR_SEND_WITH_INV)
          p.ieth = m.imm;
        else
          p.imm = ntohl(m.imm);
      }
      const size_t off = static_cast<size_t>(uint64_t{i} * mtu), len = packet_size(data.size(), i, mtu);
      emit(req, p, len ? data.data() + off : nullptr, len);
    }
  }
  if (!reliable) return;

  // The answer, as the network engine's responder sends it (roce_receiver.cpp).
  const uint32_t last_psn = psn_add(psn, npsn - 1);
  auto ack = [&](uint8_t syndrome, uint32_t at) {
    RocePacket p = header(kAck, m.src_qpn, at);
    p.aeth = Aeth{syndrome, msn & kMask24};
    emit(resp, p, nullptr, 0);
  };
  switch (r.outcome) {
    case Outcome::kAck:
      break;
    case Outcome::kRnr:  // the whole message comes again, from its first PSN
      return ack(aeth_rnr_nak(r.rnr_timer), psn);
    case Outcome::kRemoteAccess:
    case Outcome::kRemoteInvalid:
    case Outcome::kRemoteOperational:
      return ack(nak_for(r.outcome), read || atomic ? psn : last_psn);
    default:  // nothing answered
      return;
  }
  if (read) {
    gather(m.sink, m.num_sink, m.length, &data);
    data.resize(m.length);  // (the sink holds the whole message)
    for (uint32_t i = 0; i < npsn; ++i) {
      const uint8_t op = npsn == 1       ? kReadResponseOnly
                         : i == 0        ? kReadResponseFirst
                         : i + 1 == npsn ? kReadResponseLast
                                         : kReadResponseMiddle;
      RocePacket p = header(op, m.src_qpn, psn_add(psn, i));
      p.aeth = Aeth{aeth_ack(), msn & kMask24};
      const size_t off = static_cast<size_t>(uint64_t{i} * mtu), len = packet_size(data.size(), i, mtu);
      emit(resp, p, len ? data.data() + off : nullptr, len);
    }
  } else if (atomic) {
    gather(m.sink, m.num_sink, 8, &data);
    data.resize(8);
    RocePacket p = header(kAtomicAck, m.src_qpn, psn);
    p.aeth = Aeth{aeth_ack(), msn & kMask24};
    std::memcpy(&p.atomic_ack, data.data(), 8);  // the original value, as it lands in memory
    emit(resp, p, nullptr, 0);
  } else {
    ack(aeth_ack(), last_psn);
  }
}

void capture_shm_exchange(const Message& m, Response r) {
  const bool reliable = is_reliable(m.qp_type);
  const uint32_t mtu = mtu_bytes(m);
  const uint32_t npsn = is_atomic(m.opcode) ? 1 : packets_for(m.length, mtu);
  // A reliable message that was not acknowledged (RNR NAK, nothing answered,
  // a NAK that ends the QP) goes again, if at all, with the same PSNs.
  const bool consumed = !reliable || r.outcome == Outcome::kAck;
  uint32_t psn, msn;
  {
    std::lock_guard g(g_mu);
    Flow& f = flows()[m.src_qpn];
    const uint32_t sq_psn = m.qp ? m.qp->attr.sq_psn & kMask24 : 0;
    if (f.qp != m.qp || f.sq_psn != sq_psn || (m.qp_type != IBV_QPT_UD && f.dst_qpn != m.dst_qpn))
      f = Flow{m.qp, sq_psn, m.dst_qpn, sq_psn, 0};
    psn = f.next_psn;
    if (consumed) f.next_psn = psn_add(f.next_psn, npsn);
    if (reliable && r.outcome == Outcome::kAck) f.msn = psn_add(f.msn, 1);
    msn = f.msn;
  }
  Capture& cap = Capture::get();
  exchange_packets(m, r, psn, msn, mtu, [&cap](const ExchangePacket& e) {
    cap.packet(e.src, e.dst, e.src_port, kRoceUdpPort, e.traffic_class, e.pkt, e.payload, e.len);
  });
}

}  // namespace sv::roce
