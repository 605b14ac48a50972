// A fake network for the RoCEv2 engine (transport/roce_engine.h): engines
// in one process, each over a FakeWire, their datagrams carried by a
// FakeNet that drops, duplicates, reorders and delays them, deterministically
// (a seeded generator, and rules that drop chosen packets), on a virtual
// clock. Time moves only when the net steps to its next event, a packet's
// arrival or an engine's timer, so a test of a 60 ms ACK timeout takes
// microseconds. eRPC's fake transport is the model.
//
// What is real: the engines (requester, responder, timers, counters), the
// packet codec and the ICRC. What is fake: the wire, and the targets'
// memory and receive queues (FakeTargets), which execute a message as the
// NIC model's respond() would, with none of its shared-memory machinery.
#pragma once

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <vector>

#include "net/roce_datagram.h"
#include "net/roce_frame.h"
#include "net/roce_packetiser.h"
#include "transport/roce_engine.h"

namespace sv::roce::fake {

inline constexpr uint64_t kStartNs = 1'000'000'000;

class FakeNet;

class FakeWire final : public Wire {
 public:
  FakeWire(FakeNet& net, const in6_addr& self) : net_(net), self_(self) {}
  void send(OutDatagram* d, size_t count) override;
  uint16_t source_port(const in6_addr&) const override { return 49152; }
  uint32_t link_mtu(const in6_addr&, const in6_addr&) override { return mtu; }
  uint64_t now_ns() const override;
  bool wake_at(uint64_t) override { return true; }  // the net asks each engine for its next deadline

  uint32_t mtu = 4096;
  // The datagrams of each send() (a system call on a real wire), in order.
  std::vector<std::vector<net::RocePacket>> sends;

 private:
  FakeNet& net_;
  in6_addr self_;
};

// A QP the fake responder answers for: registered memory at `va` with
// `rkey`, a count of posted receives, and what arrived, in order.
struct FakeQp {
  TargetQp t;
  std::vector<uint8_t> memory = std::vector<uint8_t>(1 << 20);
  uint64_t va = 0x100000;
  uint32_t rkey = 0x1234;
  uint32_t receives = 1u << 30;
  uint8_t min_rnr_timer = 1;
  struct Arrival {
    ibv_wr_opcode opcode;
    std::vector<uint8_t> bytes;
    uint32_t imm;
  };
  std::vector<Arrival> arrived;  // SENDs and WRITEs with immediate, as their receives completed
  uint64_t atomics_executed = 0;

  bool in_range(uint64_t addr, uint64_t len, uint32_t key) const {
    return key == rkey && addr >= va && addr + len >= addr && addr + len <= va + memory.size();
  }
};

class FakeTargets final : public Targets {
 public:
  std::map<uint32_t, FakeQp> qps;

  bool find(uint32_t qpn, TargetQp* out) override {
    auto it = qps.find(qpn);
    if (it == qps.end()) return false;
    *out = it->second.t;
    return true;
  }

  Response respond(const TargetQp& t, const Message& m) override {
    FakeQp& q = qps.at(t.qpn);
    switch (m.opcode) {
      case IBV_WR_SEND:
      case IBV_WR_SEND_WITH_IMM:
      case IBV_WR_SEND_WITH_INV:
      case IBV_WR_RDMA_WRITE_WITH_IMM: {
        const bool write = m.opcode == IBV_WR_RDMA_WRITE_WITH_IMM;
        if (write && !q.in_range(m.remote_addr, m.length, m.rkey)) return Response{Outcome::kRemoteAccess, 0};
        if (q.receives == 0) return Response{Outcome::kRnr, q.min_rnr_timer};
        --q.receives;
        FakeQp::Arrival a{m.opcode, {}, m.imm};
        for (uint32_t i = 0; i < m.num_pieces; ++i)
          a.bytes.insert(a.bytes.end(), m.pieces[i].addr, m.pieces[i].addr + m.pieces[i].len);
        q.arrived.push_back(std::move(a));
        return Response{Outcome::kAck, 0};
      }
      case IBV_WR_RDMA_WRITE:
        return q.in_range(m.remote_addr, m.length, m.rkey) ? Response{Outcome::kAck, 0}
                                                           : Response{Outcome::kRemoteAccess, 0};
      case IBV_WR_RDMA_READ: {
        if (!q.in_range(m.remote_addr, m.length, m.rkey)) return Response{Outcome::kRemoteAccess, 0};
        uint64_t off = m.remote_addr - q.va;
        for (uint32_t i = 0; i < m.num_sink; ++i) {
          std::memcpy(m.sink[i].addr, q.memory.data() + off, m.sink[i].len);
          off += m.sink[i].len;
        }
        return Response{Outcome::kAck, 0};
      }
      case IBV_WR_ATOMIC_CMP_AND_SWP:
      case IBV_WR_ATOMIC_FETCH_AND_ADD: {
        if (!q.in_range(m.remote_addr, 8, m.rkey) || m.remote_addr % 8) return Response{Outcome::kRemoteAccess, 0};
        uint64_t old;
        std::memcpy(&old, q.memory.data() + (m.remote_addr - q.va), 8);
        const uint64_t now = m.opcode == IBV_WR_ATOMIC_FETCH_AND_ADD ? old + m.compare_add
                             : old == m.compare_add                  ? m.swap
                                                                     : old;
        std::memcpy(q.memory.data() + (m.remote_addr - q.va), &now, 8);
        ++q.atomics_executed;
        if (m.num_sink) std::memcpy(m.sink[0].addr, &old, std::min<uint32_t>(8, m.sink[0].len));
        return Response{Outcome::kAck, 0};
      }
      default:
        return Response{Outcome::kRemoteInvalid, 0};
    }
  }

  Response place_write(const TargetQp& t, const Message& m, uint64_t offset, const uint8_t* data,
                       uint32_t len) override {
    FakeQp& q = qps.at(t.qpn);
    if (!q.in_range(m.remote_addr + offset, len, m.rkey)) return Response{Outcome::kRemoteAccess, 0};
    std::memcpy(q.memory.data() + (m.remote_addr + offset - q.va), data, len);
    return Response{Outcome::kAck, 0};
  }
};

// A requester QP's answers (SendAnswers), as core's requester would take
// them: here recorded, in the order they came.
class RecordedAnswers final : public SendAnswers {
 public:
  RecordedAnswers(std::vector<Answer>& out, uint32_t qpn) : out_(out), qpn_(qpn) {}
  void answered(uint64_t token, Response r) override { out_.push_back(Answer{qpn_, token, r}); }

 private:
  std::vector<Answer>& out_;
  uint32_t qpn_;
};

// One end: an address, its wire, the QPs it answers for, its engine, and
// the answers its requesters got (handed over after every event).
struct FakeNode {
  FakeNode(FakeNet& net, const in6_addr& a) : addr(a), wire(net, a), engine(wire, targets) {
    engine.counters.open_in_memory();
  }
  in6_addr addr;
  FakeWire wire;
  FakeTargets targets;
  Engine engine;
  std::vector<Answer> completions;
  std::deque<RecordedAnswers> requesters;
  // Packets reach this end through an application thread's drain
  // (t_hold_answers), not the network thread's.
  bool application_drains = false;
  // QP `qpn` of this end sends with `p`; its answers go to `completions`.
  void ready_to_send(uint32_t qpn, const SendParams& p) {
    RecordedAnswers& to = requesters.emplace_back(completions, qpn);
    std::lock_guard g(engine.mu);
    engine.ready_to_send(qpn, p, to);
  }
  uint64_t count(Counter c) const { return engine.counters.device_total(c); }
};

// An RC connection from QP `qpn` of `from` to QP `peer_qpn` of `to`: `from`
// sends with `p` to `*dest` (filled here), and `to` answers for its QP
// (returned), which expects `p.sq_psn` first.
inline FakeQp& connect_rc(FakeNode& from, uint32_t qpn, FakeNode& to, uint32_t peer_qpn, const SendParams& p,
                          Destination* dest) {
  std::memcpy(dest->dgid.raw, &to.addr, 16);
  std::memcpy(dest->sgid.raw, &from.addr, 16);
  FakeQp& q = to.targets.qps[peer_qpn];
  q.t.qpn = peer_qpn;
  q.t.type = IBV_QPT_RC;
  q.t.dest_qpn = qpn;
  std::memcpy(q.t.dgid.raw, &from.addr, 16);
  q.t.path_mtu = 1024;
  q.t.max_dest_rd_atomic = 16;
  q.t.rq_psn = p.sq_psn;
  from.ready_to_send(qpn, p);
  return q;
}

// One packet as it went onto the fake wire.
struct Carried {
  uint64_t at_ns;
  in6_addr src, dst;
  net::RocePacket pkt;  // headers (payload pointer not kept)
  bool dropped;
};

struct Impairments {
  double drop = 0;       // probability each packet is lost
  double duplicate = 0;  // probability each packet arrives twice
  uint64_t delay_ns = 5'000;
  uint64_t jitter_ns = 0;  // each packet is delayed by up to this much more: packets overtake each other
};

class FakeNet {
 public:
  explicit FakeNet(uint64_t seed = 1) : rng_(seed) {}

  // A node at 10.0.0.`last_octet` (IPv4-mapped, as RoCEv2 GIDs are).
  FakeNode& add_node(uint8_t last_octet) {
    return nodes_.emplace_back(*this, net::v4_mapped(htonl(0x0a000000u | last_octet)));
  }

  uint64_t now_ns() const { return now_; }
  Impairments impair;
  std::vector<Carried> log;  // every packet sent, in order

  // Drops the next packet `match` is true for (rules apply in order, once each).
  void drop_once(std::function<bool(const net::RocePacket&)> match) { rules_.push_back(std::move(match)); }

  void carry(const in6_addr& src, const in6_addr& dst, const uint8_t* data, size_t len) {
    net::RocePacket pkt;
    std::vector<uint8_t> bytes(net::kDatagramHeadroom + len);
    std::memcpy(bytes.data() + net::kDatagramHeadroom, data, len);
    const bool ok = len >= net::kIcrcBytes && net::decode(bytes.data() + net::kDatagramHeadroom, len - net::kIcrcBytes, &pkt);
    bool dropped = false;
    if (ok)
      for (auto it = rules_.begin(); it != rules_.end(); ++it)
        if ((*it)(pkt)) {
          rules_.erase(it);
          dropped = true;
          break;
        }
    if (!dropped && impair.drop > 0) dropped = uniform_() < impair.drop;
    Carried c{now_, src, dst, pkt, dropped};
    c.pkt.payload = nullptr;  // (the bytes go on with the packet)
    log.push_back(c);
    if (dropped) return;
    const int copies = impair.duplicate > 0 && uniform_() < impair.duplicate ? 2 : 1;
    for (int c = 0; c < copies; ++c) {
      const uint64_t delay = impair.delay_ns + (impair.jitter_ns ? rng_() % (impair.jitter_ns + 1) : 0);
      queue_.emplace(std::make_pair(now_ + delay, seq_++), InFlight{src, dst, bytes});
    }
  }

  // Moves time to the next event (a packet arrives, or a timer is due) and
  // handles it; false when nothing is left to happen before `limit_ns`.
  bool step(uint64_t limit_ns = UINT64_MAX) {
    uint64_t timer = 0;
    for (FakeNode& n : nodes_)
      if (const uint64_t d = n.engine.next_deadline(); d && (!timer || d < timer)) timer = d;
    const bool packet = !queue_.empty();
    if (!packet && !timer) return false;
    const uint64_t next = timer && (!packet || timer <= queue_.begin()->first.first) ? timer : queue_.begin()->first.first;
    if (next > limit_ns) {
      now_ = std::max(now_, limit_ns);
      return false;
    }
    if (timer && (!packet || timer <= queue_.begin()->first.first)) {
      now_ = std::max(now_, timer);
      for (FakeNode& n : nodes_) {
        const uint64_t d = n.engine.next_deadline();
        if (!d || d > now_) continue;
        EngineLock g(n.engine);
        n.engine.on_timers(now_);
      }
    } else {
      auto it = queue_.begin();
      now_ = std::max(now_, it->first.first);
      InFlight f = std::move(it->second);
      queue_.erase(it);
      deliver(f);
    }
    for (FakeNode& n : nodes_) n.engine.hand_over_answers();
    return true;
  }

  // Steps until `done`, nothing is left to happen, or the next event is
  // more than `limit_ns` of virtual time away (time then stands at the
  // limit); whether `done`.
  bool run_until(const std::function<bool()>& done, uint64_t limit_ns = 10'000'000'000) {
    const uint64_t end = now_ + limit_ns;
    while (!done() && step(end)) {
    }
    return done();
  }

 private:
  struct InFlight {
    in6_addr src, dst;
    std::vector<uint8_t> bytes;  // kDatagramHeadroom, then the datagram
  };

  void deliver(InFlight& f) {
    for (FakeNode& n : nodes_) {
      if (std::memcmp(&n.addr, &f.dst, sizeof f.dst) != 0) continue;
      const size_t len = f.bytes.size() - net::kDatagramHeadroom;
      net::DatagramAddrs a{f.src, f.dst, n.wire.source_port(f.src), net::kRoceUdpPort};
      if (!net::datagram_icrc_ok(a, f.bytes.data(), len)) return;
      net::RocePacket pkt;
      if (!net::decode(f.bytes.data() + net::kDatagramHeadroom, len - net::kIcrcBytes, &pkt)) return;
      HoldAnswers hold(n.application_drains);
      EngineLock g(n.engine);
      n.engine.receive(pkt, PacketAddrs{f.src, f.dst}, len);
      return;
    }
  }

  double uniform_() { return std::uniform_real_distribution<double>(0, 1)(rng_); }

  uint64_t now_ = kStartNs;
  uint64_t seq_ = 0;
  std::mt19937_64 rng_;
  std::deque<FakeNode> nodes_;
  std::multimap<std::pair<uint64_t, uint64_t>, InFlight> queue_;
  std::vector<std::function<bool(const net::RocePacket&)>> rules_;
};

inline void FakeWire::send(OutDatagram* d, size_t count) {
  std::vector<net::RocePacket>& call = sends.emplace_back();
  for (size_t i = 0; i < count; ++i) {
    net::RocePacket pkt;
    if (d[i].len >= net::kIcrcBytes && net::decode(d[i].data, d[i].len - net::kIcrcBytes, &pkt)) call.push_back(pkt);
    net_.carry(d[i].src, d[i].dst, d[i].data, d[i].len);
  }
}
inline uint64_t FakeWire::now_ns() const { return net_.now_ns(); }

}  // namespace sv::roce::fake
