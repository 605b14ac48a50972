// The RC (and XRC) responder of the RoCEv2 engine, as rxe_resp.c has it: a
// request packet for a QP of this host goes through the states of
// roce_roles.h, one function each, from its checks (source, PSN, operation
// sequence, READ resources) to its execution by the NIC model (through
// Targets: core/responder.h respond() on a real host) and the answer: an
// ACK, an RNR NAK, a NAK, READ responses or an ATOMIC ACKNOWLEDGE.
// Duplicates are answered again (READs re-executed from the read
// resources, atomics replayed from their saved result), never executed
// twice; a gap draws one sequence-error NAK.
#include <algorithm>
#include <cstring>

#include "core/limits.h"
#include "net/roce_packetiser.h"
#include "transport/roce_engine.h"
#include "transport/roce_inbound.h"
#include "transport/roce_roles.h"
#include "transport/roce_verdict.h"
#include "util/log.h"

namespace sv::roce {

using namespace net;
using State = ResponderState;

// One request packet on its way through the responder's states.
class Responder {
 public:
  Responder(Engine& e, const RocePacket& pkt, const PacketAddrs& from, const TargetQp& t)
      : e_(e),
        pkt_(pkt),
        from_(from),
        t_(t),
        info_(opcode_info(pkt.bth.opcode)),
        to_(reply_to(from)),
        d_(source_of(from)),
        psn_(pkt.bth.psn),
        qpn_(t.qpn),
        peer_qpn_(t.dest_qpn) {}

  void run() {
    run_role<State>("responder", qpn_, psn_, info_->name, [this](State s) { return step(s); });
  }

 private:
  State step(State s) {
    switch (s) {
      case State::kCheckSource: return check_source();
      case State::kCheckPsn: return check_psn();
      case State::kSequenceNak: return sequence_nak();
      case State::kDuplicate: return duplicate();
      case State::kCheckRead: return check_read();
      case State::kReadReply: return read_reply();
      case State::kAtomic: return atomic();
      case State::kCheckOpSequence: return check_op_sequence();
      case State::kPlace: return place();
      case State::kComplete: return complete();
      case State::kAcknowledge: return acknowledge();
      case State::kNak: return nak();
      case State::kDone: break;
    }
    return State::kDone;
  }

  bool is_read() const { return info_->is(kRead); }
  bool is_atomic() const { return info_->is(kAtomic); }
  bool is_write() const { return info_->is(kWrite); }
  void answer(uint8_t syndrome, uint32_t psn) { e_.answer(qpn_, to_, peer_qpn_, syndrome, psn, r_->msn); }
  Response respond(const Message& m) { return e_.targets_.respond(t_, m); }
  // The verdict ends the message: with a NAK for an error, silently for
  // anything else (the QP cannot take it: not ready, not connected).
  State fail(Response verdict, uint32_t psn) {
    verdict_ = verdict;
    nak_psn_ = psn;
    return is_error_verdict(verdict.outcome) ? State::kNak : State::kDone;
  }

  // Only the connected peer's packets count (rxe's check_addr); through
  // the host service, only its process's.
  State check_source() {
    if (std::memcmp(&from_.src, t_.dgid.raw, 16) != 0 || !from_peer_slot(from_, t_.dest_qpn)) {
      e_.counters.add_device(kNoQp);
      return State::kDone;
    }
    return State::kCheckPsn;
  }

  State check_psn() {
    auto [it, fresh] = e_.receivers.try_emplace(qpn_);
    r_ = &it->second;
    if (fresh) r_->epsn = t_.rq_psn;
    order_ = psn_compare(psn_, r_->epsn);
    if (order_ > 0) return State::kSequenceNak;  // a packet is missing: ask for it once
    if (order_ < 0) {
      e_.counters.add(qpn_, kDuplicates);
      return is_read() ? State::kCheckRead : State::kDuplicate;  // a past READ is served again
    }
    r_->nak_sent = false;
    return is_read() ? State::kCheckRead : is_atomic() ? State::kAtomic : State::kCheckOpSequence;
  }

  State sequence_nak() {
    if (!r_->nak_sent) {
      SV_DEBUG("QP %#x: PSN %#x while expecting %#x: sequence NAK", qpn_, psn_, r_->epsn);
      answer(aeth_nak(NakCode::kPsnSequenceError), r_->epsn);
    }
    r_->nak_sent = true;
    return State::kDone;
  }

  // Our answer was lost: say again what we said.
  State duplicate() {
    SV_DEBUG("QP %#x: duplicate PSN %#x (expecting %#x)", qpn_, psn_, r_->epsn);
    if (is_atomic()) {
      for (const AtomicReplay& a : r_->replays)
        if (a.valid && a.psn == psn_)
          e_.transmit(Engine::kAnswers, qpn_, to_.src, to_.dst, to_.traffic_class,
                      atomic_ack_packet(peer_qpn_, psn_, r_->msn, a.original), nullptr, 0);
      return State::kDone;
    }
    answer(aeth_ack(), psn_add(r_->epsn, kMask24));  // everything before epsn arrived
    return State::kDone;
  }

  State check_read() {
    read_len_ = pkt_.reth.len;
    read_mtu_ = std::min(t_.path_mtu >= 256 && t_.path_mtu <= 4096 ? t_.path_mtu : 1024u, e_.link_mtu_to(from_.src));
    if (order_ < 0) {
      // Repeated: only a READ this responder executed, still in its
      // resources, is answered again. A requester asks again from its
      // first missing response (a later PSN, the rest of the range), as rxe
      // finds it among its read resources.
      const ReadReplay* again = nullptr;
      for (const ReadReplay& rr : r_->reads) {
        const uint32_t k = psn_sub(psn_, rr.psn);
        if (rr.valid && k < rr.packets && rr.rkey == pkt_.reth.rkey && pkt_.reth.va >= rr.va &&
            uint64_t{pkt_.reth.va} + read_len_ == rr.va + rr.len)
          again = &rr;
      }
      if (!again) {
        e_.counters.add(qpn_, kStaleReads);
        return State::kDone;
      }
    } else if (read_len_ > limits::kMaxMsgSize) {
      return fail(Response{Outcome::kRemoteInvalid, 0}, psn_);
    }
    // The whole range is checked first (rkey, bounds, access), with nothing
    // read; the bytes then go out a packet at a time: no buffer of the
    // length the packet claims is ever allocated.
    Message m = message_for(pkt_, pkt_, t_, d_);
    m.num_sink = 0;
    m.length = read_len_;
    if (const Response v = respond(m); v.outcome != Outcome::kAck) return fail(v, psn_);
    return State::kReadReply;
  }

  State read_reply() {
    const uint32_t n = packets_for(read_len_, read_mtu_);
    if (order_ == 0) {
      r_->epsn = psn_add(psn_, n);
      r_->msn = psn_add(r_->msn, 1);
      const uint32_t keep = std::clamp<uint32_t>(t_.max_dest_rd_atomic, 1, kReadReplays);
      r_->reads[r_->next_read % keep] = ReadReplay{psn_, n, pkt_.reth.rkey, read_len_, pkt_.reth.va, true};
      r_->next_read = (r_->next_read + 1) % keep;
    }
    std::vector<uint8_t> chunk(std::min(read_mtu_, read_len_));
    for (uint32_t i = 0; i < n; ++i) {
      const size_t size = packet_size(read_len_, i, read_mtu_);
      if (size) {
        Message part = message_for(pkt_, pkt_, t_, d_);
        Piece sink{chunk.data(), static_cast<uint32_t>(size)};
        part.sink = &sink;
        part.num_sink = 1;
        part.remote_addr = pkt_.reth.va + packet_offset(i, read_mtu_);
        part.length = size;
        // Deregistered while being read: what was sent stays sent, the
        // rest is a remote access error, as on a NIC.
        if (const Response v = respond(part); v.outcome != Outcome::kAck) return fail(v, psn_add(psn_, i));
      }
      e_.transmit(Engine::kAnswers, qpn_, to_.src, to_.dst, to_.traffic_class,
                  read_response_packet(peer_qpn_, psn_, i, n, r_->msn), chunk.data(), size);
    }
    return State::kDone;
  }

  State atomic() {
    uint64_t original = 0;
    Message m = message_for(pkt_, pkt_, t_, d_);
    Piece sink{reinterpret_cast<uint8_t*>(&original), 8};
    m.sink = &sink;
    m.num_sink = 1;
    if (const Response v = respond(m); v.outcome != Outcome::kAck) return fail(v, psn_);
    r_->epsn = psn_add(psn_, 1);
    r_->msn = psn_add(r_->msn, 1);
    r_->replays[r_->next_replay] = AtomicReplay{psn_, original, true};
    r_->next_replay = (r_->next_replay + 1) % kAtomicReplays;
    e_.transmit(Engine::kAnswers, qpn_, to_.src, to_.dst, to_.traffic_class,
                atomic_ack_packet(peer_qpn_, psn_, r_->msn, original), nullptr, 0);
    return State::kDone;
  }

  // SEND or WRITE, packet by packet: a SEND is gathered until its last
  // packet (its receive WQE is taken then), a WRITE placed as it comes.
  State check_op_sequence() {
    const Response invalid{Outcome::kRemoteInvalid, 0};
    if (info_->starts_message()) {
      if (r_->in_message) return fail(invalid, psn_);  // the previous message never ended
      r_->in_message = true;
      r_->message_psn = psn_;
      r_->first = pkt_;
      r_->bytes.clear();
      r_->placed = 0;
    } else if (!r_->in_message || opcode_info(r_->first.bth.opcode)->is(kWrite) != is_write()) {
      return fail(invalid, psn_);
    }
    const uint64_t so_far = is_write() ? r_->placed : r_->bytes.size();
    if (so_far + pkt_.payload_len > (is_write() ? uint64_t{r_->first.reth.len} : limits::kMaxMsgSize)) {
      r_->in_message = false;
      return fail(invalid, psn_);
    }
    return State::kPlace;
  }

  State place() {
    verdict_ = Response{Outcome::kAck, 0};
    if (is_write() && pkt_.payload_len) {
      Message m = message_for(r_->first, pkt_, t_, d_);
      m.length = r_->first.reth.len;
      verdict_ = e_.targets_.place_write(t_, m, r_->placed, pkt_.payload, static_cast<uint32_t>(pkt_.payload_len));
      r_->placed += pkt_.payload_len;
    } else if (!is_write()) {
      r_->bytes.insert(r_->bytes.end(), pkt_.payload, pkt_.payload + pkt_.payload_len);
    }
    if (verdict_.outcome != Outcome::kAck) {
      r_->in_message = false;  // a placement failed: the message goes no further
      return State::kAcknowledge;
    }
    r_->epsn = psn_add(psn_, 1);
    if (info_->ends_message()) return State::kComplete;
    if (pkt_.bth.ack_req) answer(aeth_ack(), psn_);
    return State::kDone;
  }

  State complete() {
    r_->in_message = false;
    Message m = message_for(r_->first, pkt_, t_, d_);
    Piece piece{r_->bytes.data(), static_cast<uint32_t>(r_->bytes.size())};
    m.pieces = &piece;
    m.num_pieces = r_->bytes.empty() ? 0 : 1;
    m.length = is_write() ? r_->placed : r_->bytes.size();
    verdict_ = Response{Outcome::kRemoteInvalid, 0};  // a WRITE shorter than its RETH said
    if (!is_write() || r_->first.reth.len == r_->placed) verdict_ = respond(m);
    return State::kAcknowledge;
  }

  State acknowledge() {
    switch (verdict_.outcome) {
      case Outcome::kAck:
        r_->msn = psn_add(r_->msn, 1);
        answer(aeth_ack(), psn_);
        break;
      case Outcome::kRnr:  // the whole message comes again, from its first PSN
        r_->epsn = r_->message_psn;
        answer(aeth_rnr_nak(verdict_.rnr_timer), r_->message_psn);
        break;
      case Outcome::kRemoteAccess:
      case Outcome::kRemoteInvalid:
      case Outcome::kRemoteOperational:
        answer(nak_syndrome(verdict_.outcome), psn_);
        break;
      default:  // the QP cannot take it (not ready, not connected): as if it never came
        r_->epsn = r_->message_psn;
        break;
    }
    return State::kDone;
  }

  State nak() {
    answer(nak_syndrome(verdict_.outcome), nak_psn_);
    return State::kDone;
  }

  Engine& e_;
  const RocePacket& pkt_;
  const PacketAddrs& from_;
  const TargetQp& t_;
  const OpcodeInfo* info_;
  const PacketAddrs to_;
  const Destination d_;
  const uint32_t psn_, qpn_, peer_qpn_;
  Receiver* r_ = nullptr;  // from check_psn on
  int order_ = 0;          // the PSN against the expected one
  uint32_t read_len_ = 0, read_mtu_ = 0;
  Response verdict_{Outcome::kAck, 0};
  uint32_t nak_psn_ = 0;
};

void Engine::receive_reliable(const RocePacket& pkt, const PacketAddrs& from, const TargetQp& t) {
  Responder(*this, pkt, from, t).run();
}

}  // namespace sv::roce
