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
#include "net/roce_packetiser.h"
#include "net/udp_sport.h"
#include "transport/roce_capture.h"
#include "transport/roce_request.h"
#include "transport/roce_verdict.h"
#include "util/private_heap.h"

namespace sv::roce {
namespace {

using namespace net;

// What the capture remembers of a requester QP: its send parameters, where
// its PSNs are, and the MSN its responder has reached. Made when the QP
// becomes ready to send, gone when it is reset or destroyed; its PSNs start
// again when it talks to another peer.
struct Flow {
  uint32_t sq_psn = 0;  // the attribute the PSNs started from
  uint32_t mtu = 1024;  // its path MTU in bytes
  uint32_t dst_qpn = 0;
  uint32_t next_psn = 0;
  uint32_t msn = 0;
};

std::mutex g_mu;
PrivateUnorderedMap<uint32_t, Flow>& flows() {
  static auto* f = new_private<PrivateUnorderedMap<uint32_t, Flow>>();  // never destroyed: messages may flow until exit
  return *f;
}


// The bytes of `n` pieces, `limit` at most, in one buffer.
void gather(const Piece* pieces, uint32_t n, uint64_t limit, std::vector<uint8_t>* out) {
  out->clear();
  for (uint32_t i = 0; i < n && out->size() < limit; ++i) {
    const size_t take = std::min<uint64_t>(pieces[i].len, limit - out->size());
    out->insert(out->end(), pieces[i].addr, pieces[i].addr + take);
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

  thread_local std::vector<uint8_t> data;
  Request q = request_of(m);
  q.mtu = mtu;
  q.first_psn = psn;

  // The request.
  if (read || atomic) {
    emit(req, request_packet(q, 0), nullptr, 0);
  } else {
    gather(m.pieces, m.num_pieces, m.length, &data);
    for (uint32_t i = 0; i < npsn; ++i) {
      const size_t len = packet_size(data.size(), i, mtu);
      emit(req, request_packet(q, i), len ? data.data() + packet_offset(i, mtu) : nullptr, len);
    }
  }
  if (!reliable) return;

  // The answer, as the network engine's responder sends it (roce_receiver.cpp).
  const uint32_t last_psn = psn_add(psn, npsn - 1);
  auto ack = [&](uint8_t syndrome, uint32_t at) { emit(resp, ack_packet(m.src_qpn, at, syndrome, msn), nullptr, 0); };
  switch (r.outcome) {
    case Outcome::kAck:
      break;
    case Outcome::kRnr:  // the whole message comes again, from its first PSN
      return ack(aeth_rnr_nak(r.rnr_timer), psn);
    case Outcome::kRemoteAccess:
    case Outcome::kRemoteInvalid:
    case Outcome::kRemoteOperational:
      return ack(nak_syndrome(r.outcome), read || atomic ? psn : last_psn);
    default:  // nothing answered
      return;
  }
  if (read) {
    gather(m.sink, m.num_sink, m.length, &data);
    data.resize(m.length);  // (the sink holds the whole message)
    for (uint32_t i = 0; i < npsn; ++i) {
      const size_t len = packet_size(data.size(), i, mtu);
      emit(resp, read_response_packet(m.src_qpn, psn, i, npsn, msn), len ? data.data() + packet_offset(i, mtu) : nullptr,
           len);
    }
  } else if (atomic) {
    gather(m.sink, m.num_sink, 8, &data);
    data.resize(8);
    uint64_t original;
    std::memcpy(&original, data.data(), 8);  // the original value, as it lands in memory
    emit(resp, atomic_ack_packet(m.src_qpn, psn, msn, original), nullptr, 0);
  } else {
    ack(aeth_ack(), last_psn);
  }
}

void capture_ready(uint32_t qpn, const SendParams& p) {
  std::lock_guard g(g_mu);
  auto [it, fresh] = flows().try_emplace(qpn);
  Flow& f = it->second;
  if (fresh || f.sq_psn != (p.sq_psn & kMask24)) f = Flow{p.sq_psn & kMask24, 0, 0, p.sq_psn & kMask24, 0};
  f.mtu = mtu_bytes(p.path_mtu);
}

void capture_forget(uint32_t qpn) {
  std::lock_guard g(g_mu);
  flows().erase(qpn);
}

void capture_shm_exchange(const Message& m, Response r) {
  const bool reliable = is_reliable(m.qp_type);
  // A reliable message that was not acknowledged (RNR NAK, nothing answered,
  // a NAK that ends the QP) goes again, if at all, with the same PSNs.
  const bool consumed = !reliable || r.outcome == Outcome::kAck;
  uint32_t psn, msn, mtu, npsn;
  {
    std::lock_guard g(g_mu);
    Flow& f = flows()[m.src_qpn];
    if (m.qp_type != IBV_QPT_UD && f.dst_qpn != m.dst_qpn) f = Flow{f.sq_psn, f.mtu, m.dst_qpn, f.sq_psn, 0};
    // (A UD message is one packet of at most the port MTU.)
    mtu = m.qp_type == IBV_QPT_UD ? 4096 : f.mtu;
    npsn = is_atomic(m.opcode) ? 1 : packets_for(m.length, mtu);
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
