// The requester side of RoCEv2 (IBTA vol 1, 9.5-9.7): a work request becomes
// packets with consecutive PSNs; an RC message stays on the wire until the
// responder acknowledged its last PSN, is resent from the first
// unacknowledged PSN (go-back-N) on a sequence-error NAK or when the ACK
// timer (4.096 us x 2^timeout) fires, at most retry_cnt times, and ends with
// the responder's verdict, handed back to the QP's requester
// (core/requester.h answer_from_network).
#include <arpa/inet.h>
#include <sys/timerfd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>

#include "core/gid_table.h"
#include "core/ib_timers.h"
#include "core/qp.h"
#include "core/transport.h"
#include "net/roce_datagram.h"
#include "net/roce_frame.h"
#include "net/udp_sport.h"
#include "transport/roce_capture.h"
#include "transport/roce_engine.h"
#include "transport/roce_request.h"
#include "transport/roce_verdict.h"
#include "util/clock.h"
#include "util/log.h"

namespace sv::roce {
namespace {

using namespace net;

constexpr uint64_t kFirstRttGuessNs = 250'000;      // before any round trip was measured
constexpr uint64_t kMinProbeNs = 200'000;

// The QP's path MTU, no larger than what the link carries (`link_mtu`; rxe
// clamps it the same way, to its port's MTU, which follows the netdev's).
uint32_t path_mtu_bytes(const SendParams& p, uint32_t link_mtu) { return std::min(mtu_bytes(p.path_mtu), link_mtu); }

void gather(const Message& m, PrivateVector<uint8_t>* out) {
  out->clear();
  out->reserve(m.length);
  for (uint32_t i = 0; i < m.num_pieces; ++i) out->insert(out->end(), m.pieces[i].addr, m.pieces[i].addr + m.pieces[i].len);
}

}  // namespace

void Engine::transmit(Stream stream, uint32_t local_qpn, const in6_addr& src, const in6_addr& dst,
                      uint8_t traffic_class, const RocePacket& pkt, const uint8_t* payload, size_t len) {
  Outgoing& o = out_[stream];
  Batch& b = o.building;
  if (b.datagrams.size() == kBatch) send_full(o);
  if (b.bufs.size() <= b.datagrams.size()) b.bufs.emplace_back();
  PrivateVector<uint8_t>& buf = b.bufs[b.datagrams.size()];
  buf.resize(kDatagramHeadroom + kDatagramOverhead + len);
  DatagramAddrs a;
  a.src_ip = src;
  a.dst_ip = dst;
  uint8_t lane;
  a.src_port = wire_.source_port_to(dst, pkt.bth.dest_qp, &lane);
  a.dst_port = kRoceUdpPort;
  // (Into a ring: memory, not a wire, and its receiver checks no ICRC.
  // Two users' ib_write_bw -s 1M went 1.11x as fast without it.)
  const bool unsealed = wire_.through_memory(dst, pkt.bth.dest_qp);
  size_t n = build_datagram(a, pkt, payload, len, buf.data(), !unsealed);
  if (!n) return;
  b.datagrams.push_back(
      OutDatagram{src, dst, kRoceUdpPort, traffic_class, buf.data() + kDatagramHeadroom, n, unsealed, lane});
  b.qpns.push_back(local_qpn);
  Capture& cap = Capture::get();
  if (__builtin_expect(cap.enabled(), 0)) cap.packet(src, dst, a.src_port, a.dst_port, traffic_class, pkt, payload, len);
}

void Engine::take_for_sending(Outgoing& o) {
  if (!g_network_in_use.load(std::memory_order_relaxed)) g_network_in_use.store(true, std::memory_order_relaxed);
  // Whatever was held goes now (also from send_full: a stream emptied
  // there must not leave the alarm a deadline with nothing behind it).
  if (&o == &out_[kAnswers]) {
    answers_due = false;
    if (answers_held_ns) {
      answers_held_ns = 0;
      answers_held.store(false, std::memory_order_relaxed);
    }
  }
  // Counted a run of one QP's datagrams at a time (a window's are one
  // run): two counter updates a packet were ~100 instructions of it.
  const Batch& b = o.building;
  for (size_t i = 0, n = b.datagrams.size(); i < n;) {
    size_t j = i;
    uint64_t bytes = 0;
    for (; j < n && b.qpns[j] == b.qpns[i]; ++j) bytes += b.datagrams[j].len;
    counters.add(b.qpns[i], kPacketsSent, j - i);
    counters.add(b.qpns[i], kBytesSent, bytes);
    i = j;
  }
  std::swap(o.building, o.sending);
}

void Engine::send_full(Outgoing& o) {
  std::lock_guard order(o.order_mu);
  take_for_sending(o);
  if (&o == &out_[kAnswers]) counters.add_device(kAnswersAlone, o.sending.datagrams.size());
  wire_.send(o.sending.datagrams.data(), o.sending.datagrams.size());
  o.sending.clear();
}

void Engine::unlock_and_send(std::unique_lock<BriefSpinMutex>& held) {
  // Under a QP's send queue lock (a post, an answer handed to its
  // requester): sent at the scope's end, the lock let go
  // (core/deferred_sends.h).
  if ((!out_[kRequests].building.datagrams.empty() || !out_[kAnswers].building.datagrams.empty()) &&
      defer_sends(&Engine::send_deferred, this)) {
    held.unlock();
    return;
  }
  bool taken[2] = {false, false};
  for (int s = 0; s < 2; ++s) {
    if (out_[s].building.datagrams.empty()) continue;
    if (s == kAnswers && t_hold_answers && !answers_due) {  // for this thread's next post (answers_held_ns)
      if (!answers_held_ns) {
        answers_held_ns = wire_.now_ns();
        answers_held.store(true, std::memory_order_relaxed);
        if (!armed_ns || armed_ns > answers_held_ns + kAnswerHoldNs) arm_timer();
      }
      continue;
    }
    out_[s].order_mu.lock();  // a sender of this stream may still be at it
    take_for_sending(out_[s]);
    taken[s] = true;
  }
  if (taken[kAnswers])
    counters.add_device(taken[kRequests] ? kAnswersCarried : kAnswersAlone, out_[kAnswers].sending.datagrams.size());
  held.unlock();
  if (taken[kRequests] && taken[kAnswers]) {
    // One system call for both, requests first: a reply and the ACK held
    // for it (as long or shorter) make one GSO send, one trip through the
    // stack (RoceSocket::send_many).
    both_.clear();
    for (int s = 0; s < 2; ++s)
      both_.insert(both_.end(), out_[s].sending.datagrams.begin(), out_[s].sending.datagrams.end());
    wire_.send(both_.data(), both_.size());
    for (int s = 0; s < 2; ++s) {
      out_[s].sending.clear();
      out_[s].order_mu.unlock();
    }
    return;
  }
  for (int s = 0; s < 2; ++s) {
    if (!taken[s]) continue;
    Batch& b = out_[s].sending;
    wire_.send(b.datagrams.data(), b.datagrams.size());
    b.clear();
    out_[s].order_mu.unlock();
  }
}

void Engine::send_deferred(void* engine) {
  EngineLock g(*static_cast<Engine*>(engine));  // (its release sends them)
}

void Engine::send_held_answers() {
  if (!answers_held.load(std::memory_order_relaxed)) return;
  HoldAnswers send_them(false);
  EngineLock g(*this);  // (its release sends them)
}

void Engine::finish_sends() {
  send_held_answers();
  for (Outgoing& o : out_) {
    std::lock_guard g(o.order_mu);  // (a sender holds it until its send is done)
  }
}

// Times the round trip of the packet with PSN `psn` (one asking for an
// ACK, sent for the first time) unless one is being timed already.
void Engine::time_round_trip(Sender& s, uint32_t psn) {
  if (s.rtt_sent_ns) return;
  s.rtt_psn = psn;
  s.rtt_sent_ns = wire_.now_ns();
}

void Engine::reset_outgoing() {
  for (Outgoing& o : out_) {
    o.building.clear();
    o.sending.clear();
    new (&o.order_mu) BriefSpinMutex();
  }
  answers_held_ns = 0;
  answers_held.store(false, std::memory_order_relaxed);
  answers_due = false;
}

uint32_t Engine::link_mtu_to(const in6_addr& dst, const in6_addr& src) {
  constexpr uint64_t kKeepNs = 1'000'000'000;
  const uint64_t now = wire_.now_ns();
  if (link_mtus_.size() > 4096) link_mtus_.clear();  // a UD QP spraying many destinations
  // (Groups by their source address: it, not the group, names the link.)
  LinkMtu& l = link_mtus_[net::is_multicast(dst) ? src : dst];
  if (!l.mtu || now - l.read_ns > kKeepNs) {
    l.mtu = wire_.link_mtu(dst, src);
    l.read_ns = now;
  }
  return l.mtu;
}

void Engine::ready_to_send(uint32_t qpn, const SendParams& p, SendAnswers& to) {
  auto [it, fresh] = senders.try_emplace(qpn);
  Sender& s = it->second;
  if (fresh) s.next_psn = p.sq_psn & kMask24;
  s.params = p;
  s.answers = &to;
}

// Hands each answered work request back to its QP's requester. call_mu
// keeps destroy_qp from freeing a QP while it is being answered, and is
// taken before the answers are: two threads (the network thread and an
// application's poll) each holding a batch must hand them over in the
// order they were taken, or a QP's later answer arrives first, is taken for
// a stale one (answer_from_network) and that work request never completes.
void Engine::hand_over_answers() {
  {
    std::lock_guard g(mu);
    if (answers.empty()) return;
  }
  // What the requesters send next, answered, leaves in one batch once
  // call_mu is let go (core/deferred_sends.h).
  DeferSends after_unlock;
  std::lock_guard c(call_mu);
  PrivateVector<Answer> todo;
  {
    std::lock_guard g(mu);
    todo.swap(answers);
  }
  for (const Answer& a : todo) {
    SendAnswers* to;
    {
      std::lock_guard g(mu);
      auto it = senders.find(a.qpn);
      if (it == senders.end() || !it->second.answers) continue;  // forgotten (destroyed or reset) meanwhile
      to = it->second.answers;
    }
    to->answered(a.token, a.response);
  }
}

Response Engine::send_unreliable(const Message& m) {
  Sender& s = senders[m.src_qpn];  // (ready_to_send made it)
  const SendParams& p = s.params;
  // IBTA C10-93.1.1, as rxe (fake_udp_send): a UD message longer than the
  // port MTU is not sent, and that is no error either: the WQE completes
  // successfully. The port here is the link the message leaves on (the
  // kernel would refuse a datagram larger than it: DF is set). Every link
  // carries 256 bytes, so short messages skip the lookup.
  if (m.qp_type == IBV_QPT_UD && m.length > 256) {
    const in6_addr& dst = as_in6(m.dst->dgid);
    if (const uint32_t mtu = link_mtu_to(dst, as_in6(m.dst->sgid)); m.length > mtu) {
      static std::atomic<bool> told{false};
      if (!told.exchange(true))
        SV_INFO("a UD message of %llu bytes is longer than the %u-byte MTU of the link to %s: not sent "
                "(IBTA C10-93.1.1; ibv_query_port's active_mtu gives the limit)",
                static_cast<unsigned long long>(m.length), mtu, gid_to_string(m.dst->dgid).c_str());
      SV_DEBUG("QP 0x%06x: UD message of %llu bytes > link MTU %u: not sent", m.src_qpn,
               static_cast<unsigned long long>(m.length), mtu);
      s.next_psn = psn_add(s.next_psn, 1);  // rxe gives it a PSN all the same
      return Response{Outcome::kAck, 0};
    }
  }
  // Packets are built (payload copied) now: one piece needs no gathering.
  thread_local PrivateVector<uint8_t> gathered;
  const uint8_t* data = m.num_pieces == 1 ? m.pieces[0].addr : nullptr;
  if (!data) {
    gather(m, &gathered);
    data = gathered.data();
  }
  // UD: one packet, if it fits (above); UC: the whole message at once.
  // Nothing comes back.
  Request req = request_of(m);
  req.first_psn = s.next_psn;
  req.mtu = m.qp_type == IBV_QPT_UD ? std::max<uint32_t>(1, static_cast<uint32_t>(m.length))
                                    : path_mtu_bytes(p, link_mtu_to(as_in6(m.dst->dgid)));
  const uint32_t n = psns_of(req);
  for (uint32_t i = 0; i < n; ++i)
    transmit(kRequests, m.src_qpn, as_in6(m.dst->sgid), as_in6(m.dst->dgid), m.dst->traffic_class,
             request_packet(req, i), data + packet_offset(i, req.mtu), packet_size(m.length, i, req.mtu));
  s.next_psn = psn_add(s.next_psn, n);
  return Response{Outcome::kAck, 0};
}

Response Engine::start_reliable(const Message& m) {
  Sender& s = senders[m.src_qpn];  // (ready_to_send made it)
  const SendParams& p = s.params;
  if (__builtin_expect(!s.answers, 0))  // a QP that never became ready to send here: its answers would be lost
    SV_ERROR("QP %#x sends RC over the network without having told the transport it is ready to send", m.src_qpn);
  // Built whole before it joins the queue: should a copy fail for want of
  // memory, nothing has changed (RoceTransport::deliver: a lost packet).
  Outbound o;
  o.token = m.token;
  o.dst = *m.dst;
  o.req = request_of(m);
  o.sink.assign(m.sink, m.sink + m.num_sink);
  o.req.mtu = path_mtu_bytes(p, link_mtu_to(as_in6(m.dst->dgid)));
  if (m.opcode == IBV_WR_RDMA_READ) {
    o.data.assign(m.length, 0);
  } else if (!is_atomic(m.opcode)) {
    if (m.num_pieces == 1 && m.pieces_are_app_memory)
      o.borrowed = m.pieces[0].addr;
    else
      gather(m, &o.data);
  }
  o.npsn = psns_of(o.req);
  o.req.first_psn = s.next_psn;
  if (s.out.empty()) ++busy_senders;
  s.out.push_back(std::move(o));
  s.next_psn = psn_add(s.next_psn, s.out.back().npsn);
  if (s.out.size() == 1) {  // the timer starts with the first unanswered message
    s.timeout = p.timeout;
    s.retry_cnt = retry_budget(p.retry_cnt);
    s.rnr_left = rnr_retry_budget(p.rnr_retry);
    restart_timer(s, true);
  } else if (s.out.size() == 2 && s.probe_ns && s.probe_waits_hold) {
    // No longer lone: its answers are not held for long (first_probe_gap).
    s.probe_waits_hold = false;
    const uint64_t period = s.timeout ? ack_timeout_ns(s.timeout) : kForeverRetryNs;
    s.probe_gap_ns = first_probe_gap(s, period);
    const uint64_t sooner = wire_.now_ns() + s.probe_gap_ns;
    if (sooner < s.probe_ns) {
      s.probe_ns = sooner;
      if (!armed_ns || sooner < armed_ns) rearm = true;
    }
  }
  pump(s);
  return Response{Outcome::kPending, 0};
}

uint64_t Engine::first_probe_gap(const Sender& s, uint64_t period) {
  const uint64_t rtt = s.srtt_ns ? s.srtt_ns : kFirstRttGuessNs;
  // A lone message's answer may wait at the responder for its application's
  // next post, up to kAnswerHoldNs (t_hold_answers), as TCP's delayed ACK
  // does (and TCP's tail loss probe waits that out too, RFC 8985 7.2): a
  // probe before then is sent for nothing. Worse, it draws an answer alone,
  // after which a ping-pong's replies come apart from their ACKs and wait
  // for the network thread (ib_write_lat between two users of one host:
  // ~3% of messages probed, typical 35-60 us against 4-5 us without).
  const uint64_t floor = s.out.size() == 1 ? kAnswerHoldNs + kMinProbeNs : kMinProbeNs;
  return std::clamp<uint64_t>(4 * rtt, floor, std::max(floor, period / 2));
}

void Engine::restart_timer(Sender& s, bool progress) {
  const uint64_t now = wire_.now_ns(), period = s.timeout ? ack_timeout_ns(s.timeout) : kForeverRetryNs;
  s.deadline_ns = now + period;
  s.probe_gap_ns = first_probe_gap(s, period);
  s.probe_ns = period / 2 > kMinProbeNs ? now + s.probe_gap_ns : 0;
  s.probe_waits_hold = s.out.size() == 1;
  const uint64_t due = s.probe_ns ? s.probe_ns : s.deadline_ns;
  if (!armed_ns || due < armed_ns) rearm = true;
  if (progress) s.retry_left = s.retry_cnt;
}

void Engine::request_read(Sender& s, Outbound& o) {
  const RocePacket p = request_packet(o.req, o.acked);  // from its first missing response
  if (o.high == 0) time_round_trip(s, p.bth.psn);
  o.high = o.npsn;
  transmit(kRequests, o.req.src_qpn, as_in6(o.dst.sgid), as_in6(o.dst.dgid), o.dst.traffic_class, p, nullptr, 0);
  o.sent = o.npsn;
}

void Engine::send_packet(Sender& s, Outbound& o, uint32_t i, bool ack_req) {
  const bool fresh = i >= o.high;
  if (fresh) o.high = i + 1;
  RocePacket p = request_packet(o.req, i);
  const bool data = !o.asks_data();
  // Besides the last packet, every kAckRequestEvery-th asks for an ACK, so
  // the window moves before the message ends.
  if (data) p.bth.ack_req = p.bth.ack_req || ack_req || (i + 1) % kAckRequestEvery == 0;
  if (p.bth.ack_req && fresh) time_round_trip(s, p.bth.psn);
  transmit(kRequests, o.req.src_qpn, as_in6(o.dst.sgid), as_in6(o.dst.dgid), o.dst.traffic_class, p,
           data ? o.payload() + packet_offset(i, o.req.mtu) : nullptr, data ? packet_size(o.req.length, i, o.req.mtu) : 0);
}

// Sends what the window allows, oldest message first: READ and atomic
// requests once each, SEND/WRITE packets while fewer than window() are
// unacknowledged. The last packet the window allows asks for an ACK: with
// a small window (many busy QPs) it may come before the kAckRequestEvery-th.
// A READ counts the responses it asks for: it goes while they fit in the
// window, or alone (its responder answers it whole, unpaced: with
// max_rd_atomic READs of 1 MiB at once, ib_read_bw -s 1M between two hosts
// averaged 644 MB/s against a peak of 874; counted, 952 against 1004).
void Engine::pump(Sender& s) {
  if (s.rnr_resume_ns) return;  // waiting out an RNR NAK
  const uint32_t window = this->window();
  uint32_t in_flight = 0;
  for (const Outbound& o : s.out) in_flight += o.in_flight();
  for (Outbound& o : s.out) {
    if (o.asks_data()) {
      if (o.sent == 0) {
        const uint32_t asked = o.npsn - o.acked;
        if (in_flight && in_flight + asked > window) return;
        in_flight += asked;
        if (o.req.opcode == IBV_WR_RDMA_READ)
          request_read(s, o);
        else
          send_packet(s, o, 0);
        o.sent = o.npsn;
      }
      continue;
    }
    while (o.sent < o.npsn && in_flight < window) {
      ++in_flight;
      send_packet(s, o, o.sent++, in_flight == window);
    }
    if (in_flight >= window) return;
  }
}

// Everything from packet `index` of message `k` on goes again.
void Engine::go_back(Sender& s, size_t k, uint32_t index) {
  if (k < s.out.size()) counters.add(s.out[k].req.src_qpn, kRetransmits);
  s.rtt_sent_ns = 0;  // an answer now may be to either copy: no sample
  for (size_t j = k; j < s.out.size(); ++j) {
    Outbound& o = s.out[j];
    if (o.asks_data()) {
      o.sent = 0;  // a READ asks again from its first missing response
    } else {
      o.acked = j == k ? std::max(o.acked, index) : 0;
      o.sent = o.acked;
    }
  }
  pump(s);
}

void Engine::finish_front(Sender& s, Response r) {
  Outbound& o = s.out.front();
  answers.push_back(Answer{o.req.src_qpn, o.token, r});
  s.out.pop_front();
  if (s.out.empty()) --busy_senders;
  s.rnr_left = rnr_retry_budget(s.params.rnr_retry);  // the next message has its own
  restart_timer(s, true);
}

// The responder had no receive for the oldest message (an RNR NAK): it
// dropped it and everything after it, and expects it again from its first
// PSN. Everything goes again once the timer ran out (on_timers); after
// rnr_retry such answers for one message, it ends with RNR_RETRY_EXC_ERR.
void Engine::wait_out_rnr(Sender& s, uint8_t timer_code) {
  if (s.rnr_left == 0) {
    SV_INFO("QP %#x: still receiver-not-ready after %u RNR retries", s.out.front().req.src_qpn,
            rnr_retry_budget(s.params.rnr_retry));
    drop_after_front(s);
    finish_front(s, Response{Outcome::kRnrRetryExceeded, 0});
    return;
  }
  if (s.rnr_left != kRnrRetryForever) --s.rnr_left;
  for (Outbound& o : s.out) o.sent = o.acked = 0;  // (READs and atomics take no receive: none is before it)
  s.rtt_sent_ns = 0;
  s.probe_pending = false;
  s.rnr_resume_ns = wire_.now_ns() + rnr_delay_ns(timer_code);
  if (!armed_ns || s.rnr_resume_ns < armed_ns) rearm = true;
}

// After an RNR NAK or an error the later messages are not answered: the
// requester sends them again after the RNR timer, or flushes them.
void Engine::drop_after_front(Sender& s) {
  s.out.resize(1);
  s.next_psn = psn_add(s.out.front().req.first_psn, s.out.front().npsn);
}

// An answer about message `k` acknowledges every SEND and WRITE before it
// (IBTA 9.7.5.1.1). A READ or atomic before it still waiting for its data
// lost its response: it asks again, and false says to ignore this answer.
bool Engine::finish_before(Sender& s, size_t k) {
  for (size_t j = 0; j < k; ++j) {
    if (s.out.front().asks_data()) {
      go_back(s, 0, 0);
      return false;
    }
    finish_front(s, Response{Outcome::kAck, 0});
  }
  return true;
}

// Sends again, asking for ACKs, the oldest unacknowledged packet and the
// newest one sent. Whatever was lost, an answer comes back within a round
// trip that says where the responder stands: a lost tail (no later packet
// to draw a NAK) arrives or draws the NAK now; after a lost NAK (the
// responder drops everything until the packet it expects, and NAKs once),
// the oldest is that packet and the newest, now out of order, draws a new
// NAK (and if that is lost too, the ACK of exactly the oldest says the
// responder stopped there: on_response sends everything after it again);
// if nothing was lost, both are duplicates and are acknowledged.
void Engine::probe(Sender& s) {
  s.probe_gap_ns *= 2;
  s.probe_waits_hold = false;
  const uint64_t next = wire_.now_ns() + s.probe_gap_ns;
  s.probe_ns = next < s.deadline_ns ? next : 0;
  Outbound& oldest = s.out.front();
  if (oldest.sent == 0) return;
  counters.add(oldest.req.src_qpn, kProbes);
  s.rtt_sent_ns = 0;
  auto resend = [&](Outbound& o, uint32_t index) {
    if (o.req.opcode == IBV_WR_RDMA_READ)
      request_read(s, o);  // from its first missing response
    else
      send_packet(s, o, o.asks_data() ? 0 : index, true);
  };
  const uint32_t first = std::min(oldest.acked, oldest.npsn - 1);
  resend(oldest, first);
  s.probe_pending = !oldest.asks_data();
  s.probe_psn = psn_add(oldest.req.first_psn, first);
  for (size_t j = s.out.size(); j-- > 0;) {
    Outbound& o = s.out[j];
    if (o.sent == 0) continue;
    if (j != 0 || (o.sent - 1 != first && !o.asks_data())) resend(o, o.sent - 1);
    return;
  }
}

void Engine::on_timers(uint64_t now) {
  for (auto& [qpn, s] : senders) {
    if (s.rnr_resume_ns) {  // no ACK timer or probe while the responder is not ready
      if (s.out.empty()) s.rnr_resume_ns = 0;
      if (!s.rnr_resume_ns || s.rnr_resume_ns > now) continue;
      s.rnr_resume_ns = 0;
      counters.add(qpn, kRetransmits);
      restart_timer(s, false);
      pump(s);
      continue;
    }
    if (!s.out.empty() && s.probe_ns && s.probe_ns <= now && s.deadline_ns > now) probe(s);
    if (s.out.empty() || s.deadline_ns > now) continue;
    counters.add(qpn, kAckTimeouts);
    if (s.timeout != 0) {
      if (s.retry_left == 0) {
        SV_INFO("QP %#x: no ACK for PSN %#x after %u retries", qpn,
                psn_add(s.out.front().req.first_psn, s.out.front().acked), s.retry_cnt);
        drop_after_front(s);
        finish_front(s, Response{Outcome::kRetryExceeded, 0});
        continue;
      }
      --s.retry_left;
    }
    SV_DEBUG("QP %#x: ACK timeout, resending from PSN %#x (%zu messages on the wire, %u retries left)", qpn,
             psn_add(s.out.front().req.first_psn, s.out.front().acked), s.out.size(), s.retry_left);
    restart_timer(s, false);
    go_back(s, 0, s.out.front().acked);  // timeout 0: no limit, but lost packets still go again
  }
}

void Engine::arm_timer() {
  rearm = false;
  const uint64_t due = next_deadline();
  if (!due || (armed_ns && armed_ns <= due) || (looks_by_ns && looks_by_ns <= due)) return;
  if (wire_.wake_at(due)) armed_ns = due;
}

uint64_t Engine::next_deadline() const {
  uint64_t best = 0;
  for (const auto& [qpn, s] : senders)
    if (!s.out.empty()) {
      const uint64_t d = s.rnr_resume_ns                             ? s.rnr_resume_ns
                         : s.probe_ns && s.probe_ns < s.deadline_ns ? s.probe_ns
                                                                    : s.deadline_ns;
      if (best == 0 || d < best) best = d;
    }
  if (answers_held_ns && (best == 0 || answers_held_ns + kAnswerHoldNs < best)) best = answers_held_ns + kAnswerHoldNs;
  return best;
}

}  // namespace sv::roce
