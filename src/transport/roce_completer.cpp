// The RC (and XRC) completer of the RoCEv2 engine, as rxe_comp.c has it: an
// answer from the network (ACK, NAK, READ response, ATOMIC ACKNOWLEDGE)
// for a requester of ours goes through the states of roce_roles.h, one
// function each: is it from the peer, about which message and packet, and
// then what it does to the messages on the wire (acknowledges them, sends
// them again from a PSN, ends one with the responder's verdict, fills in a
// READ's or an atomic's data). Answers the requester waits for go to
// Engine::answers, for the QP's requester (core/requester.h).
#include <algorithm>
#include <cstring>
#include <utility>

#include "net/roce_packetiser.h"
#include "transport/roce_engine.h"
#include "transport/roce_roles.h"
#include "transport/roce_verdict.h"
#include "util/log.h"

namespace sv::roce {

using namespace net;
using State = CompleterState;

// Between two requests for the same missing READ response at least this
// long, or a round trip if longer: the responses already on their way
// show the gap too.
constexpr uint64_t kMinGapWaitNs = 50'000;

// One answer on its way through the completer's states.
class Completer {
 public:
  Completer(Engine& e, Sender& s, const RocePacket& pkt, const PacketAddrs& from)
      : e_(e), s_(s), pkt_(pkt), from_(from), info_(opcode_info(pkt.bth.opcode)), qpn_(pkt.bth.dest_qp) {}

  void run() {
    run_role<State>("completer", qpn_, pkt_.bth.psn, info_->name, [this](State s) { return step(s); });
  }

 private:
  State step(State s) {
    switch (s) {
      case State::kCheckSource: return check_source();
      case State::kCheckPsn: return check_psn();
      case State::kCheckAnswer: return check_answer();
      case State::kImplicitAck: return implicit_ack();
      case State::kSequenceNak: return sequence_nak();
      case State::kAck: return ack();
      case State::kVerdictNak: return verdict_nak();
      case State::kReadResponse: return read_response();
      case State::kReadGap: return read_gap();
      case State::kAtomicAck: return atomic_ack();
      case State::kDone: break;
    }
    return State::kDone;
  }

  // Only the peer answers: a response from any other address is dropped
  // before it moves anything, as rxe's check_addr drops it (a NAK from a
  // stranger on the link, who had read the PSN in flight off the wire,
  // ended the QP: e2e_roce_stranger). (Through the host service, also
  // from the peer's process: any local user can send from this host's
  // addresses.)
  State check_source() {
    const Outbound& oldest = s_.out.front();
    if (std::memcmp(&from_.src, oldest.dst.dgid.raw, sizeof from_.src) != 0 ||
        !from_peer_slot(from_, oldest.req.dst_qpn)) {
      e_.counters.add_device(kNoQp);
      return State::kDone;
    }
    return State::kCheckPsn;
  }

  State check_psn() {
    // The message this answer is about, and which of its packets.
    for (k_ = 0; k_ < s_.out.size(); ++k_) {
      i_ = (pkt_.bth.psn - s_.out[k_].req.first_psn) & kMask24;  // distance on the PSN circle
      if (i_ < s_.out[k_].npsn) break;
    }
    // About no packet sent (a message queued behind, or the rest of one not
    // sent yet): no responder answers a PSN it never received, so the
    // answer is forged or corrupt, and it must not complete what never left.
    if (k_ == s_.out.size() || i_ >= s_.out[k_].high) return State::kDone;
    // Only an answer about a message in flight times the round trip or
    // answers a probe: a forged ACK of any PSN past the timed one gave an
    // RTT of the few microseconds since the send, and loss probes went out
    // every 200 us from then on.
    if (s_.rtt_sent_ns && psn_compare(pkt_.bth.psn, s_.rtt_psn) >= 0) {
      const uint64_t sample = e_.wire_.now_ns() - s_.rtt_sent_ns;
      s_.srtt_ns = s_.srtt_ns ? (7 * s_.srtt_ns + sample) / 8 : sample;
      s_.rtt_sent_ns = 0;
    }
    probe_answer_ = std::exchange(s_.probe_pending, false) && pkt_.bth.psn == s_.probe_psn;
    return State::kCheckAnswer;
  }

  // Which answer, and whether it fits the message it is about; then the
  // messages before that one are done (kImplicitAck) and it is handled.
  State check_answer() {
    const Outbound& o = s_.out[k_];
    if (info_->is(kAckOp)) {
      const uint8_t syn = pkt_.aeth.syndrome;
      if (aeth_type(syn) == AethType::kAck) return then(State::kAck);
      if (aeth_type(syn) == AethType::kNak && static_cast<NakCode>(aeth_value(syn)) == NakCode::kPsnSequenceError) {
        // The responder expects packet i of message k: all before it arrived.
        SV_DEBUG("QP %#x: sequence NAK, resending from PSN %#x", qpn_, pkt_.bth.psn);
        e_.counters.add(qpn_, kSeqNaksReceived);
        return then(State::kSequenceNak);
      }
      verdict_ = verdict_of(syn);
      return verdict_ ? then(State::kVerdictNak) : State::kDone;  // (a reserved syndrome)
    }
    if (info_->is(kRead) && info_->is(kResponse)) {
      if (o.req.opcode != IBV_WR_RDMA_READ) return State::kDone;
      if (i_ == o.acked) return then(State::kReadResponse);
      // Past the next one expected: a response before it was lost. The
      // requester asks again from the first missing one at once, as a NAK
      // would have it send again (IBTA 9.7.5.1.5: a READ response with a
      // PSN past the expected one is an implied NAK), instead of waiting
      // for the loss probe or the ACK timer.
      return k_ == 0 && i_ > o.acked ? State::kReadGap : State::kDone;
    }
    if (info_->is(kAtomic) && info_->is(kResponse))
      return is_atomic(o.req.opcode) ? then(State::kAtomicAck) : State::kDone;
    return State::kDone;
  }
  State then(State after) {
    after_ = after;
    return State::kImplicitAck;
  }

  // A READ or atomic before message k still waiting for its data lost its
  // response: it asks again, and this answer is ignored.
  State implicit_ack() { return e_.finish_before(s_, k_) ? after_ : State::kDone; }

  State sequence_nak() {
    e_.restart_timer(s_, false);
    e_.go_back(s_, 0, i_);
    return State::kDone;
  }

  State ack() {
    Outbound& o = s_.out.front();
    if (o.asks_data()) return State::kDone;  // its answer carries data
    if (i_ + 1 > o.acked) {
      o.acked = i_ + 1;
      e_.restart_timer(s_, true);
    }
    if (o.acked == o.npsn) e_.finish_front(s_, Response{Outcome::kAck, 0});
    if (probe_answer_ && !s_.out.empty() && !s_.out.front().asks_data() && s_.out.front().sent > s_.out.front().acked)
      e_.go_back(s_, 0, s_.out.front().acked);  // the responder took the probe and nothing after it
    else
      e_.pump(s_);
    return State::kDone;
  }

  State verdict_nak() {
    if (verdict_->outcome == Outcome::kRnr) {  // the engine waits it out itself (Engine::wait_out_rnr)
      e_.counters.add(qpn_, kRnrNaksReceived);
      e_.wait_out_rnr(s_, verdict_->rnr_timer);
      return State::kDone;
    }
    e_.counters.add(qpn_, kErrorNaksReceived);
    e_.drop_after_front(s_);
    e_.finish_front(s_, *verdict_);
    return State::kDone;
  }

  State read_gap() {
    const Outbound& o = s_.out.front();
    const uint64_t now = e_.wire_.now_ns();
    if (s_.gap_acked == o.acked && now - s_.gap_asked_ns < std::max(s_.srtt_ns, kMinGapWaitNs)) return State::kDone;
    s_.gap_acked = o.acked;
    s_.gap_asked_ns = now;
    SV_DEBUG("QP %#x: READ response %u of %u missing, asking again from it", qpn_, o.acked, o.npsn);
    e_.restart_timer(s_, false);
    e_.go_back(s_, 0, o.acked);
    return State::kDone;
  }

  State read_response() {
    Outbound& o = s_.out.front();
    const uint64_t at = packet_offset(i_, o.req.mtu);
    if (pkt_.payload_len > o.req.mtu || at + pkt_.payload_len > o.req.length) return State::kDone;
    std::memcpy(o.data.data() + at, pkt_.payload, pkt_.payload_len);
    ++o.acked;
    e_.restart_timer(s_, true);
    if (o.acked < o.npsn) return State::kDone;
    size_t off = 0;
    for (const Piece& piece : o.sink) {
      std::memcpy(piece.addr, o.data.data() + off, piece.len);
      off += piece.len;
    }
    e_.finish_front(s_, Response{Outcome::kAck, 0});
    e_.pump(s_);
    return State::kDone;
  }

  State atomic_ack() {
    Outbound& o = s_.out.front();
    const auto* bytes = reinterpret_cast<const uint8_t*>(&pkt_.atomic_ack);
    uint32_t done = 0;
    for (const Piece& piece : o.sink) {
      const uint32_t n = std::min<uint32_t>(piece.len, 8 - done);
      std::memcpy(piece.addr, bytes + done, n);
      done += n;
      if (done == 8) break;
    }
    e_.finish_front(s_, Response{Outcome::kAck, 0});
    e_.pump(s_);
    return State::kDone;
  }

  Engine& e_;
  Sender& s_;
  const RocePacket& pkt_;
  const PacketAddrs& from_;
  const OpcodeInfo* info_;
  const uint32_t qpn_;
  size_t k_ = 0;    // the message the answer is about (from check_psn on)
  uint32_t i_ = 0;  // and its packet
  bool probe_answer_ = false;
  std::optional<Response> verdict_;
  State after_ = State::kDone;  // what implicit_ack goes on to
};

void Engine::on_response(const RocePacket& pkt, const PacketAddrs& from) {
  auto it = senders.find(pkt.bth.dest_qp);
  if (it == senders.end()) return;  // no requester of ours
  count_received(pkt.bth.dest_qp, pkt);
  if (it->second.out.empty()) return;  // nothing in flight: a late duplicate
  Completer(*this, it->second, pkt, from).run();
}

}  // namespace sv::roce
