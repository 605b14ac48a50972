// The RoCEv2 engine's state, shared by its three parts: roce_sender.cpp
// (the requester side of RC/UC/UD: packets out, ACKs and responses in,
// retransmission), roce_receiver.cpp (the responder side: packets in, the
// NIC model's respond() on the target QP, ACKs/NAKs and responses out) and
// roce_transport.cpp (sockets, the network thread, the Transport face).
//
// Locks, in the order they nest: call_mu (held while the thread calls into a
// QP's requester, so destroy_qp can wait that out), a QP's sq_mu, mu (every
// table below). Nothing is called back into a QP while mu is held.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/deferred_sends.h"
#include "core/message.h"
#include "shm/host.h"
#include "core/transport.h"
#include "core/pd.h"
#include "net/roce_header.h"
#include "net/roce_packetiser.h"
#include "shm/layout.h"
#include "transport/roce_counters.h"
#include "transport/roce_socket.h"
#include "transport/roce_targets.h"
#include "transport/roce_wire.h"
#include "util/brief_spin_mutex.h"
#include "util/private_heap.h"

namespace sv {

struct Qp;

namespace roce {

// A RoCEv2 GID is an IPv6 address (IPv4 as ::ffff:a.b.c.d).
inline const in6_addr& as_in6(const ibv_gid& g) { return *reinterpret_cast<const in6_addr*>(g.raw); }

// Packets a requester may have unacknowledged, and how often it asks for an
// ACK. The window must cover the link's round trip: 512 packets gave
// ib_write_bw ~1.5x the throughput of 64 on a veth (bench/results/
// roce_latest.md was measured with 512). Such bursts once overflowed the
// forwarding between processes that share the port under load
// (RETRY_EXC_ERR in e2e_roce_ib_write_bw_2pairs under ASan), when every
// packet for another process was a unix datagram of its own (the queue
// holds 10); a GRO buffer whose packets are all for one other process now
// goes whole (roce_forward.h), and 512 holds.
inline constexpr uint32_t kWindowPackets = 512;
// What all of an engine's requesters may have unacknowledged together, and
// the least each may: a busy QP's window is this share of the busy ones,
// within [kMinWindowPackets, kWindowPackets]. 256 QPs of one process each
// with a full window had 131072 packets in flight into a 4 MiB socket
// buffer: the receiver dropped most of them, every QP went back again at
// once, and QPs ended with RETRY_EXC_ERR (bench/scale.sh, ib_write_bw -q 256
// between two namespaces; e2e_roce_ib_write_bw_256qps). A NIC's link has no
// such cliff. 8192 in all (32 each for 256 QPs) still overflowed that
// buffer when the receiver drained slowly (under ASan, on a slower host,
// beside busy loops): RETRY_EXC_ERR again, in CI. 4096 (16 each, at least
// 4) fit it: the same test passed 3 of 3 there, and -q 256 between two
// namespaces was no slower (A/B: 603/548 against 527/515 MB/s; -q 16, 256
// each, 810/792 against 687/792). One QP keeps 512.
inline constexpr uint32_t kEngineWindowPackets = 4096;
inline constexpr uint32_t kMinWindowPackets = 4;
inline constexpr uint32_t kAckRequestEvery = 64;
// Responder resources kept to answer a repeated atomic without executing it again.
inline constexpr size_t kAtomicReplays = 16;

// An RC (or XRC) message on the wire.
struct Outbound {
  uint64_t token = 0;  // names its work request to the QP's SendAnswers
  Destination dst;
  net::Request req;  // what its packets say (net/roce_packetiser.h)
  PrivateVector<uint8_t> data;  // SEND/WRITE: the payload (unless borrowed); READ: where responses land
  // SEND/WRITE of one piece of the application's memory: read from there
  // as its packets go, without a copy at post time (~15% of the sender's
  // core at 1 MiB messages), until the work request completes, is flushed
  // or its memory is deregistered (copy_payload()).
  const uint8_t* borrowed = nullptr;
  PrivateVector<Piece> sink;    // READ/atomic: the requester's buffers
  uint32_t npsn = 1;  // PSNs [req.first_psn, req.first_psn + npsn)
  uint32_t sent = 0;   // packets (READ, atomics: all, once the request went) sent so far, from the first
  uint32_t acked = 0;  // packets acknowledged (READ: responses received in order)
  uint32_t high = 0;   // packets sent at least once (those below it go again only as retransmissions)

  bool asks_data() const { return net::asks_data(req.opcode); }
  const uint8_t* payload() const { return borrowed ? borrowed : data.data(); }
  void copy_payload() {
    if (!borrowed) return;
    data.assign(borrowed, borrowed + req.length);
    borrowed = nullptr;
  }
  // Packets on their way: a SEND/WRITE's sent and not acknowledged; a
  // READ's (or atomic's) responses asked for and not yet come.
  uint32_t in_flight() const { return asks_data() ? (sent ? npsn - acked : 0) : sent - acked; }
};

// A QP's requester: its messages on the wire, oldest first, and the ACK
// timer, which runs while any is unanswered.
struct Sender {
  SendParams params;               // as the QP last became ready to send
  // The oldest READ's responses came with a gap (one lost on the way):
  // asked again from the first missing one when `acked` stood at
  // `gap_acked`, at `gap_asked_ns` (Completer::read_gap). Responses
  // already on their way behind the lost one show the same gap for a round
  // trip: they draw no second request.
  uint32_t gap_acked = UINT32_MAX;
  uint64_t gap_asked_ns = 0;
  SendAnswers* answers = nullptr;  // where its work requests are answered
  uint32_t next_psn = 0;
  PrivateDeque<Outbound> out;
  uint64_t deadline_ns = 0;
  uint32_t retry_left = 0;
  uint8_t timeout = 0;  // the QP's timeout attribute (0: no limit)
  uint32_t retry_cnt = 0;
  // Loss probe: when answers stop for a few round trips although packets
  // are unacknowledged (a lost tail draws no NAK, and a lost NAK is not
  // sent again), the oldest unacknowledged and the newest packet go again
  // (probe()), without waiting for the ACK timer, typically tens of
  // milliseconds. While the quiet lasts, probes go again at doubling gaps
  // (`probe_gap_ns`) until the ACK timer is due: a probe, or its answer,
  // lost with everything else (3% loss) then costs a few round trips, not
  // the rest of the timeout (ib_write_bw with 3% loss stood ~7% of its run
  // in 67 ms timeouts with one probe per period).
  uint64_t probe_ns = 0;
  uint64_t probe_gap_ns = 0;
  // The first probe waits out an answer held for a lone message
  // (Engine::first_probe_gap); a second message posted meanwhile brings it
  // in.
  bool probe_waits_hold = false;
  // The PSN of the oldest packet the last probe sent again, while its answer
  // is awaited: an ACK of exactly that PSN says the responder had stopped
  // there (its NAK was lost), so everything after it goes again.
  bool probe_pending = false;
  uint32_t probe_psn = 0;
  // Round trip, Karn-style: one AckReq packet (never a retransmitted one)
  // is timed at a time, to the answer that covers it.
  uint64_t srtt_ns = 0;
  uint32_t rtt_psn = 0;
  uint64_t rtt_sent_ns = 0;  // 0: no packet being timed
  // RNR: the oldest message was answered "receiver not ready". Everything
  // from it on goes again, same PSNs, once its timer ran out
  // (rnr_resume_ns; 0: not waiting), at most rnr_retry times per message
  // (kRnrRetryForever: no limit), as a NIC retries without its driver.
  uint64_t rnr_resume_ns = 0;
  uint32_t rnr_left = 0;
};

struct AtomicReplay {
  uint32_t psn = 0;
  uint64_t original = 0;
  bool valid = false;
};

// A QP's responder: the expected PSN, the message in progress.
struct ReadReplay {
  uint32_t psn = 0, packets = 0;  // the PSNs its response used
  uint32_t rkey = 0, len = 0;
  uint64_t va = 0;
  bool valid = false;
};
inline constexpr size_t kReadReplays = 16;

// Set while an application thread drains the sockets (RoceTransport::
// progress): the answers (ACKs, NAKs, READ responses) it builds then are
// held for its next call into the engine (Engine::answers_held_ns).
inline thread_local bool t_hold_answers = false;

// Sets t_hold_answers for a scope; puts back what it was.
class HoldAnswers {
 public:
  explicit HoldAnswers(bool hold) : before_(std::exchange(t_hold_answers, hold)) {}
  ~HoldAnswers() { t_hold_answers = before_; }
  HoldAnswers(const HoldAnswers&) = delete;
  HoldAnswers& operator=(const HoldAnswers&) = delete;

 private:
  bool before_;
};

// How long held answers may wait at most (the alarm sends them then). Not
// shorter: the alarm is armed for it only when nothing is due sooner (a
// ping-pong's own loss probe is), and a shorter one meant a timerfd_settime
// per message and a network thread woken every few dozen microseconds on
// cores the pollers need (ib_send_lat ~7 -> ~13 us at 50 us). An application
// that stops both posting and polling may draw one loss probe from its
// peer (at least 200 us), which the network thread answers, sending what
// was held.
inline constexpr uint64_t kAnswerHoldNs = 1'000'000;

struct Receiver {
  uint32_t epsn = 0;
  uint32_t msn = 0;
  bool nak_sent = false;  // one NAK per sequence error, until the expected PSN arrives
  bool in_message = false;
  uint32_t message_psn = 0;  // the PSN its first packet had
  net::RocePacket first;     // the first packet's headers (RETH)
  PrivateVector<uint8_t> bytes;  // SEND: the payload so far
  uint64_t placed = 0;         // WRITE: payload bytes placed so far
  AtomicReplay replays[kAtomicReplays];
  size_t next_replay = 0;
  // The last RDMA READs executed (as many as the responder's resources,
  // max_dest_rd_atomic, at most kReadReplays): a repeated READ is served
  // again only when it is one of them, as rxe keeps its read resources; any
  // other READ with a PSN in the past is dropped unanswered.
  ReadReplay reads[kReadReplays];
  size_t next_read = 0;
};

// What the engine owes a requester: its work request `token` answered.
struct Answer {
  uint32_t qpn;
  uint64_t token;
  Response response;
};

// Where a packet came from and went to: for answers, the GRH and the ICRC.
struct PacketAddrs {
  in6_addr src{}, dst{};
  uint8_t traffic_class = 0, hop_limit = 64;
  // Nonzero: the packet came from a process of this host through the host
  // service, which leased it this registry slot (util/host_service_socket.h
  // kFromProcess): a connected QP takes it only from its peer's slot.
  uint32_t sender_slot = 0;
};

// Whether a packet with these addresses may be from the process of our
// connected peer QP `peer_qpn` (from elsewhere, the address decides).
inline bool from_peer_slot(const PacketAddrs& from, uint32_t peer_qpn) {
  return from.sender_slot == 0 || from.sender_slot == shm::qpn_owner(peer_qpn);
}

class Engine {
 public:
  // Over `wire`, answering for `targets`; both outlive the engine.
  Engine(Wire& wire, Targets& targets) : wire_(wire), targets_(targets) {}
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  BriefSpinMutex mu;
  BriefSpinMutex call_mu;
  PrivateUnorderedMap<uint32_t, Sender> senders;      // by local QPN
  // Senders with unanswered messages (non-empty `out`): they share
  // kEngineWindowPackets (window()). Kept where an `out` fills
  // (start_reliable) or empties (finish_front, drop_outbound).
  uint32_t busy_senders = 0;
  // Packets one busy sender may have unacknowledged now.
  uint32_t window() const {
    return std::clamp(kEngineWindowPackets / std::max(busy_senders, 1u), kMinWindowPackets, kWindowPackets);
  }
  // Drops every message of `s` still waiting for its answer (its QP was
  // flushed, or is going). Under mu.
  void drop_outbound(Sender& s) {
    if (!s.out.empty()) --busy_senders;
    s.out.clear();
  }
  PrivateUnorderedMap<uint32_t, Receiver> receivers;  // by local QPN
  PrivateVector<Answer> answers;                       // filled under mu, handed over without it
  // Hands each answer to its QP's SendAnswers, in the order they were
  // taken, under call_mu (takes mu for moments; caller holds neither).
  void hand_over_answers();
  // The alarm (Wire::wake_at) for the senders' timers, armed for
  // `armed_ns` (0: not armed). Posting arms it when it would go off too
  // late instead of waking the network thread: on a machine whose cores
  // all run polling applications every wake-up costs the poster its core.
  uint64_t armed_ns = 0;
  // While the network thread naps, when it will look at the timers itself
  // (0: it watches the sockets; under mu, set by network_thread): the
  // alarm is not armed for what is due no sooner. A ping-pong's alarm is
  // always a stale one (the probe of a message answered since, or answers
  // held for a post that came), and each wake-up of the network thread on
  // a machine whose cores all poll takes one from an application (an MPI
  // ping-pong between two hosts, two cores: ~1800 wake-ups a second, a
  // fifth of the messages 30-150 us late).
  uint64_t looks_by_ns = 0;
  // Answers built while an application thread drained the sockets
  // (t_hold_answers) stay in the answer stream until it next lets go of
  // the engine lock without holding: most often in the post of its next
  // request (a ping-pong's reply), with which they leave in one system
  // call and one UDP GSO send, so that one trip through the kernel carries
  // the request and the ACK (ib_send_lat between two namespaces: ~10 -> ~7
  // us). Else at its next drain, when a QP goes, at exit, when the network
  // thread next lets go of the lock, or when the alarm goes off
  // kAnswerHoldNs after: since when they wait (0: none).
  uint64_t answers_held_ns = 0;
  std::atomic<bool> answers_held{false};  // answers_held_ns != 0, to look without mu
  // The answers built so far leave at the next release of mu, held or not
  // (under mu): a QP's flush asks it (RoceTransport::drop_sends), as a
  // NIC's ACK left on receipt, also when that release is a DeferSends
  // scope's end in a thread that holds answers.
  void answers_leave_at_release() { answers_due = !out_[kAnswers].building.datagrams.empty(); }
  // Sends the held answers now (caller holds neither mu nor call_mu).
  void send_held_answers();
  // Sends the held answers and waits for a send another thread took from
  // the batches (unlock_and_send) to be done: what the engine answered
  // has left when it returns. Before a QP goes or the process exits: the
  // network thread may have taken a ping-pong's last ACK and not sent it
  // yet, and the exit would end it there (its peer, never answered, then
  // fails with RETRY_EXC_ERR). (Caller holds neither mu nor call_mu.)
  void finish_sends();
  bool rearm = false;  // a timer may now be due before armed_ns: arm_timer() at unlock
  void arm_timer();

  // Packets leave in two streams, each in the order it was built: a
  // requester's (requests, UC/UD sends, CM MADs) and a responder's answers
  // (ACKs, NAKs, READ responses, atomic ACKs). Nothing orders one stream
  // against the other, as a NIC's requester and responder do not wait for
  // each other: an application posting its next request does not wait
  // for the network thread's ACK to leave.
  enum Stream { kRequests = 0, kAnswers = 1 };
  // Queues one packet; the stream's packets leave together when the engine
  // lock is let go (EngineLock; or when the batch is full), so a window of
  // packets costs one system call.
  void transmit(Stream stream, uint32_t local_qpn, const in6_addr& src, const in6_addr& dst, uint8_t traffic_class,
                const net::RocePacket& pkt, const uint8_t* payload, size_t len);
  // Lets go of `held` (mu) and sends what was queued, the system call
  // outside mu: the other thread (network thread or application) goes on
  // handling packets or posting meanwhile.
  void unlock_and_send(std::unique_lock<BriefSpinMutex>& held);
  // What unlock_and_send left for a DeferSends scope's end (core/deferred_sends.h).
  static void send_deferred(void* engine);
  Counters counters;

  // A packet for a QP of this end (the port routed the rest elsewhere),
  // `len` bytes on the wire: to the requester or the responder; under mu.
  void receive(const net::RocePacket& pkt, const PacketAddrs& from, size_t len);

  // Requester side (roce_sender.cpp; answers: roce_completer.cpp); under mu.
  // QP `qpn` sends with `p` from now on and is answered through `answers`
  // (Transport::ready_to_send); its PSNs start at p.sq_psn unless it sent
  // before (until forget).
  void ready_to_send(uint32_t qpn, const SendParams& p, SendAnswers& answers);
  Response send_unreliable(const Message& m);  // UC, UD: out at once (UD: if it fits the link)
  Response start_reliable(const Message& m);   // RC, XRC: kPending
  void on_response(const net::RocePacket& pkt, const PacketAddrs& from);
  void on_timers(uint64_t now_ns);
  uint64_t next_deadline() const;  // 0: none

  // A packet that arrived for QP `qpn` of this process, once the QP is
  // found: its row of the counters (the device's counted it on arrival).
  void count_received(uint32_t qpn, const net::RocePacket& pkt);

  // Responder side (roce_receiver.cpp; RC: roce_responder.cpp); under mu.
  void on_request(const net::RocePacket& pkt, const PacketAddrs& from);
  // A UD SEND to a multicast group (DestQP 0xFFFFFF), for member QP `qpn`.
  void on_group_request(const net::RocePacket& pkt, const PacketAddrs& from, uint32_t qpn);

 private:
  // The RC roles (roce_roles.h), one packet each, on the engine's state.
  friend class Responder;  // roce_responder.cpp
  friend class Completer;  // roce_completer.cpp

  void pump(Sender& s);
  void send_packet(Sender& s, Outbound& o, uint32_t index, bool ack_req = false);
  void probe(Sender& s);
  // The wait before the first loss probe (Sender::probe_ns) for what `s`
  // has unanswered, with an ACK timer of `period`.
  static uint64_t first_probe_gap(const Sender& s, uint64_t period);
  void request_read(Sender& s, Outbound& o);
  void finish_front(Sender& s, Response r);
  void drop_after_front(Sender& s);
  bool finish_before(Sender& s, size_t k);
  void go_back(Sender& s, size_t k, uint32_t index);
  void restart_timer(Sender& s, bool progress);
  void wait_out_rnr(Sender& s, uint8_t timer_code);

  Wire& wire_;
  Targets& targets_;

  void time_round_trip(Sender& s, uint32_t psn);
  void answer(uint32_t qpn, const PacketAddrs& to, uint32_t dst_qpn, uint8_t syndrome, uint32_t psn, uint32_t msn);
  // For the target QP `t`.
  void receive_unreliable(const net::RocePacket& pkt, const PacketAddrs& from, const TargetQp& t);
  void receive_reliable(const net::RocePacket& pkt, const PacketAddrs& from, const TargetQp& t);

  // link_ib_mtu() of `dst`, remembered for a second, so that a link whose
  // MTU changes is followed within a second. Per destination, not per QP:
  // UD sends go anywhere, and RC requesters and responders share it. A
  // group's link is the one of `src`, the address it is sent from.
  uint32_t link_mtu_to(const in6_addr& dst, const in6_addr& src = {});
  struct In6Hash {
    size_t operator()(const in6_addr& a) const {
      uint64_t h[2];
      std::memcpy(h, a.s6_addr, 16);
      return std::hash<uint64_t>()(h[0] * 0x9e3779b97f4a7c15ull ^ h[1]);
    }
  };
  struct In6Equal {
    bool operator()(const in6_addr& a, const in6_addr& b) const { return std::memcmp(&a, &b, sizeof a) == 0; }
  };
  struct LinkMtu {
    uint32_t mtu = 0;
    uint64_t read_ns = 0;
  };
  PrivateUnorderedMap<in6_addr, LinkMtu, In6Hash, In6Equal> link_mtus_;

  static constexpr size_t kBatch = 64;
  struct Batch {
    PrivateVector<PrivateVector<uint8_t>> bufs;
    PrivateVector<OutDatagram> datagrams;  // into bufs
    PrivateVector<uint32_t> qpns;          // the local QP of each
    void clear() {
      datagrams.clear();
      qpns.clear();
    }
  };
  // One stream: packets are built into `building` under mu. To send them a
  // thread takes `order_mu` while it still holds mu, swaps the batches and
  // sends `sending` after letting go of mu: whoever builds packets after it
  // sends them after it. The holder of order_mu owns `sending`.
  struct Outgoing {
    Batch building, sending;
    BriefSpinMutex order_mu;
  };
  Outgoing out_[2];
  bool answers_due = false;  // answers_leave_at_release
  // Both streams' packets in one send (whoever holds both order_mu).
  PrivateVector<OutDatagram> both_;
  void send_full(Outgoing& o);  // under mu
  // Under mu, with o.order_mu held: counts the packets, swaps the batches.
  void take_for_sending(Outgoing& o);

 public:
  // In a fork()ed child: nothing queued, no lock held.
  void reset_outgoing();
};

// Holds the engine's mu; sends what was queued as it lets go.
class EngineLock {
 public:
  explicit EngineLock(Engine& e) : e_(e), lock_(e.mu) {}
  ~EngineLock() {
    if (e_.rearm) e_.arm_timer();
    e_.unlock_and_send(lock_);
  }
  EngineLock(const EngineLock&) = delete;
  EngineLock& operator=(const EngineLock&) = delete;

 private:
  Engine& e_;
  std::unique_lock<BriefSpinMutex> lock_;
};

// A packet to QP1 (roce_gsi.cpp): a CM MAD, posted to the mailbox of the
// process it is for, or answered as the CM answers the unknown.
void deliver_to_gsi(Engine& e, const net::RocePacket& pkt, const PacketAddrs& from);

// Memory ran out on the data path (roce_transport.cpp): said once; what was
// in hand is dropped as a lost packet.
void out_of_memory();

}  // namespace roce
}  // namespace sv
