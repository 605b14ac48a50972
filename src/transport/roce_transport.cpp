#include "transport/roce_transport.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <optional>
#include <type_traits>
#include <thread>
#include <utility>

#include "core/faults.h"
#include "core/gid_table.h"
#include "core/multicast.h"
#include "core/qp.h"
#include "core/requester.h"
#include "core/transport.h"
#include "hostd/datagram_route.h"
#include "ibcm/mad_header.h"
#include "net/roce_datagram.h"
#include "net/roce_frame.h"
#include "net/roce_opcode.h"
#include "shm/host.h"
#include "shm/layout.h"
#include "transport/roce_capture.h"
#include "transport/roce_engine.h"
#include "transport/roce_host_targets.h"
#include "transport/roce_udp_wire.h"
#include "transport/receive_watch.h"
#include "util/clock.h"
#include "util/host_service_socket.h"
#include "util/knobs.h"
#include "util/log.h"
#include "util/short_slice.h"
#include "util/private_heap.h"

namespace sv {
namespace roce {

// An application thread that drained the sockets (RoceTransport::progress)
// less than kDrainGapNs ago keeps the network thread away from them
// (network_thread): it is polling its CQ, and will take the next packets.
constexpr uint64_t kDrainGapNs = 8'000;
// An application thread that came to drain less than kPollingNs ago is
// polling through an exchange: what the network thread answers meanwhile
// is held for it, and the thread's naps go on (network_thread).
constexpr uint64_t kPollingNs = 100'000;
// An application thread that has not come to drain for this long has
// stopped polling: its receive watch is cancelled (network_thread).
constexpr uint64_t kWatchIdleNs = 2'000'000;

// The process's RoCEv2 device: its UDP port and what reaches it (the wire),
// the QPs it answers for, the engine between them, and the registry slot
// its QP numbers carry (packets for other slots belong to other processes).
struct Nic : PrivateHeapObject {
  UdpWire port;
  HostTargets targets;
  Engine engine{port, targets};
  uint32_t slot = 0;
  std::mutex start_mu;
  std::atomic<bool> started{false};  // the sockets are open and the network thread runs
  // Held by the thread draining the sockets: the network thread, or an
  // application thread polling an empty CQ (RoceTransport::progress).
  BriefSpinMutex rx_mu;
  // When an application thread last drained the sockets itself
  // (RoceTransport::progress, from a poll of an empty CQ): while it keeps
  // doing so, the network thread stays out of its way (network_thread).
  std::atomic<uint64_t> app_drained_ns{0};
  // When an application thread last came to drain, whether or not it got
  // rx_mu: it is polling, and takes what is held for it (network_thread).
  std::atomic<uint64_t> app_polled_ns{0};
  // What tells an application thread polling an empty CQ that the sockets
  // hold something, without a system call (receive_watch.h); under rx_mu.
  ReceiveWatch watch;
  // Counts the changes of the receiving descriptors (a socket, ring or
  // service that came or went), so that the watch's set follows them
  // even when a new one has the number of one closed.
  std::atomic<uint64_t> receivers_epoch{0};
  void receivers_changed() { receivers_epoch.fetch_add(1, std::memory_order_release); }
  // With a host service (from the start, or since one came and we handed
  // it the port): we never bind the port ourselves. When the service goes
  // (it restarts), the network thread joins the next one
  // (shm::HostService::rejoin); until then the kernel may go on bringing
  // our datagrams to the members of its port's groups we hold.
  bool under_service = false;    // (the network thread's, once started)
  bool service_refused = false;  // a new service would not give us our slot: we stop asking
  uint64_t next_service_try_ns = 0;
  uint64_t service_lost_ns = 0;
  // Channels closed since the network thread last closed their bells
  // (PeerChannels::close_retired).
  std::atomic<bool> has_retired_bells{false};
};

namespace {

// For the fork and exit handlers, which take no argument.
Nic* g_nic = nullptr;

}  // namespace

// Memory ran out on the data path: what was in hand is dropped, as a lost
// packet (reliable messages are sent again). Said once.
void out_of_memory() {
  static std::atomic<bool> told{false};
  if (!told.exchange(true)) SV_WARN("out of memory on the RoCEv2 data path: packets dropped (RC sends them again)");
}

namespace {

// Receive slots: a RoCE datagram is at most a 4096-byte MTU plus headers,
// but with UDP GRO one slot takes a peer's whole GSO send (up to 64 KiB);
// anything larger (truncated) is not RoCE.
constexpr size_t kSlotBytes = 65536;
constexpr int kSlots = 16;
struct ReceiveSlots : PrivateHeapObject {
  std::vector<uint8_t> storage = std::vector<uint8_t>(kSlots * (net::kDatagramHeadroom + kSlotBytes));
  uint8_t* at(int i) { return storage.data() + i * (net::kDatagramHeadroom + kSlotBytes); }
};

// Calls fn(buf, len) for each datagram a receive slot holds, buf being
// kDatagramHeadroom before it: one, or a GRO buffer's back-to-back segments
// of `seg` bytes (the last may be shorter). A segment's headroom is the end
// of the one before, which has been handled by then.
template <typename Fn>
void for_each_segment(uint8_t* slot, ssize_t len, uint16_t seg, Fn fn) {
  if (len < 0) return;
  const size_t total = static_cast<size_t>(len), step = seg ? seg : total;
  for (size_t off = 0; off < total; off += step) fn(slot + off, std::min(step, total - off));
  if (total == 0) fn(slot, 0);
}

// A fork()ed child has no network thread and must not read its parent's
// packets: it starts afresh when it first needs the network.
void after_fork_in_child() {
  Nic& n = *g_nic;
  Engine& e = n.engine;
  n.port.sock.close();
  n.port.sock.drop_in_child();
  n.port.fwd.close();
  n.port.steered.close();
  if (n.port.wake_fd >= 0) close(n.port.wake_fd);
  n.port.wake_fd = -1;
  n.port.service.store(nullptr);  // (the child's Host has its own, or none)
  n.port.attestation.store(nullptr);
  n.port.channels.drop_in_child();
  n.watch.drop_in_child();
  n.under_service = n.service_refused = false;
  n.next_service_try_ns = n.service_lost_ns = 0;
  if (n.port.timer_fd >= 0) close(n.port.timer_fd);
  n.port.timer_fd = -1;
  e.armed_ns = 0;
  e.looks_by_ns = 0;
  e.rearm = false;
  e.senders.clear();
  e.busy_senders = 0;
  e.receivers.clear();
  e.counters.drop_in_child();
  e.answers.clear();
  e.reset_outgoing();
  new (&e.mu) BriefSpinMutex();
  new (&e.call_mu) BriefSpinMutex();
  new (&n.start_mu) std::mutex();
  new (&n.rx_mu) BriefSpinMutex();
  n.started.store(false);
}

// A UD SEND to a multicast group (DestQP 0xFFFFFF) reached this process's
// socket: the kernel hands one copy to every RoCE socket of the namespace
// once the host joined the group (rdma_join_multicast; IP_MULTICAST_ALL),
// so each process gives it to its own attached QPs and no one forwards it.
void deliver_to_members(Nic& n, const net::RocePacket& pkt, size_t len, const DatagramInfo& info,
                        uint16_t local_port) {
  Engine& e = n.engine;
  ibv_gid group;
  std::memcpy(group.raw, &info.dst, sizeof group.raw);
  if ((pkt.bth.opcode & net::kTransportMask) != net::kTransportUd || !gid_is_multicast(group)) {
    e.counters.add_device(kNoQp);  // only UD has multicast
    return;
  }
  std::vector<uint32_t> members = mcast_members(*shm::Host::get()->registry().header(), group);
  std::erase_if(members, [&](uint32_t qpn) { return shm::qpn_owner(qpn) != n.slot; });
  if (members.empty()) return;  // another process's group
  Capture& cap = Capture::get();
  if (__builtin_expect(cap.enabled(), 0))
    cap.packet(info.src, info.dst, info.src_port, local_port, info.traffic_class, pkt, pkt.payload, pkt.payload_len);
  const PacketAddrs from{info.src, info.dst, info.traffic_class, info.hop_limit};
  EngineLock g(e);
  for (uint32_t qpn : members) {
    e.counters.add(qpn, kPacketsReceived);
    e.counters.add(qpn, kBytesReceived, len);
    e.on_group_request(pkt, from, qpn);
  }
}

// How a datagram reached this process.
enum class Arrival {
  kWire,            // on our own UDP socket
  kForwarded,       // from the port owner, which checked its ICRC
  kForwardedWhole,  // from the port owner, in a whole GRO buffer: not checked yet
  kFromService,     // from the host service, which routes by DestQP and checks nothing
  kChannel,         // from a ring of another user's process (roce_peer_channels.h): memory, no ICRC to check
};

// Packets for this process's QPs, checked and decoded, handed to the
// engine under one lock: a lock per packet took a tenth of a receiving
// network thread's time (ib_write_bw -s 1M between two namespaces). The
// packets point into receive buffers, so the batch goes to the engine
// before those are used again.
class EngineBatch {
 public:
  explicit EngineBatch(Engine& e) : e_(e) {}
  ~EngineBatch() { flush(); }
  EngineBatch(const EngineBatch&) = delete;
  EngineBatch& operator=(const EngineBatch&) = delete;

  void add(const net::RocePacket& pkt, const PacketAddrs& from, size_t len) {
    if (count_ == kMax) flush();
    new (&items()[count_++]) Item{pkt, from, len};
  }
  // Where the next packet is decoded (not copied there afterwards: a
  // zeroed local and its copy were a quarter of handle_datagram). It joins
  // the batch with commit(); until then it is scratch.
  net::RocePacket& next_packet() {
    if (count_ == kMax) flush();
    return items()[count_].pkt;  // (decode assigns it whole; Item is implicit-lifetime)
  }
  // The packet next_packet() gave, decoded and accepted.
  void commit(const PacketAddrs& from, size_t len) {
    Item& it = items()[count_++];
    it.from = from;
    it.len = len;
  }
  const net::RocePacket& last_packet() { return items()[count_ - 1].pkt; }
  void flush() {
    const size_t n = std::exchange(count_, 0);
    if (!n) return;
    EngineLock g(e_);
    for (size_t i = 0; i < n; ++i) e_.receive(items()[i].pkt, items()[i].from, items()[i].len);
  }

 private:
  static constexpr size_t kMax = 64;
  struct Item {
    net::RocePacket pkt;
    PacketAddrs from;
    size_t len;
  };
  static_assert(std::is_trivially_copyable_v<Item> && std::is_trivially_destructible_v<Item>);
  Item* items() { return std::launder(reinterpret_cast<Item*>(storage_)); }
  Engine& e_;
  // Raw storage, filled as packets come: a batch is made for every drain
  // (16 datagrams from the rings), and an array of Items would have its
  // 11 KiB of default members written each time (6% of a receiving network
  // thread's time between two users of one host).
  alignas(Item) unsigned char storage_[sizeof(Item) * kMax];
  size_t count_ = 0;
};

// One datagram that arrived on UDP port `local_port` (at buf +
// kDatagramHeadroom, `len` bytes). The port owner checks the ICRC and hands
// packets for other processes' QPs on (roce_forward.h). A packet for one of
// our QPs goes to the engine now, or with `batch`.
void handle_datagram(Nic& n, uint8_t* buf, size_t len, const DatagramInfo& info, uint16_t local_port,
                     Arrival arrival, uint32_t sender_slot = 0, EngineBatch* batch = nullptr) {
  Engine& e = n.engine;
  const bool forwarded = arrival != Arrival::kWire;
  // A packet the service stamped as a local process's (sender_slot) can
  // only be from this host's addresses: one that claims another host's is
  // a local user posing as that host (the service refuses those; this is
  // the second wall). A connected QP then takes it only from its peer's
  // slot (from_peer_slot), and a QP whose peer is another host never from
  // a local process.
  if (sender_slot && !is_local_address(info.src)) {
    e.counters.add_device(kUnattested);
    return;
  }
  // From this host's addresses on our own socket (the kernel steered it
  // here): a local process the service vouches for by its source port, or
  // nobody we listen to.
  if (arrival == Arrival::kWire && n.port.attestation.load(std::memory_order_acquire) && sent_by_this_host(info)) {
    sender_slot = attested_slot(n.port.attestation.load(std::memory_order_acquire), info.src, info.src_port);
    if (!sender_slot) {
      e.counters.add_device(kUnattested);
      return;
    }
  }
  net::DatagramAddrs a;
  a.src_ip = info.src;
  a.dst_ip = info.dst;
  a.src_port = info.src_port;
  a.dst_port = local_port;
  if (arrival != Arrival::kForwarded && arrival != Arrival::kChannel && !net::datagram_icrc_ok(a, buf, len)) {
    SV_DEBUG("RoCEv2 packet with a bad ICRC dropped");
    e.counters.add_device(kIcrcErrors);
    return;
  }
  std::optional<net::RocePacket> local;  // (made only without a batch: zeroing it was a fifth of this function)
  net::RocePacket& pkt = batch ? batch->next_packet() : local.emplace();
  if (len < net::kIcrcBytes || !net::decode(buf + net::kDatagramHeadroom, len - net::kIcrcBytes, &pkt)) return;
  if (!g_network_in_use.load(std::memory_order_relaxed)) g_network_in_use.store(true, std::memory_order_relaxed);
  // A local process speaks for itself only: its UD datagrams name a source
  // QP of its own slot (or QP1, the CM's).
  if (sender_slot && (pkt.bth.opcode & net::kTransportMask) == net::kTransportUd && pkt.deth.src_qp != 1 &&
      shm::qpn_owner(pkt.deth.src_qp) != sender_slot) {
    e.counters.add_device(kUnattested);
    return;
  }
  if (pkt.bth.dest_qp == sv::ibcm::kGsiQpn) {  // a CM MAD: whoever got it posts it on
    Capture& cap = Capture::get();
    if (__builtin_expect(cap.enabled(), 0))
      cap.packet(info.src, info.dst, info.src_port, local_port, info.traffic_class, pkt, pkt.payload, pkt.payload_len);
    deliver_to_gsi(e, pkt, PacketAddrs{info.src, info.dst, info.traffic_class, info.hop_limit});
    return;
  }
  if (pkt.bth.dest_qp == shm::kMulticastQpn) {  // every member process got its own copy
    deliver_to_members(n, pkt, len, info, local_port);
    return;
  }
  const uint32_t owner = shm::qpn_owner(pkt.bth.dest_qp);
  if (owner != n.slot) {
    if (forwarded || !n.port.fwd.forward(owner, info, local_port, buf + net::kDatagramHeadroom, len))
      e.counters.add_device(kNoQp);
    else
      e.counters.add_device(kForwarded);
    return;
  }
  // Ours, but another process got it from the kernel: have the flow
  // brought here instead (roce_steering.h).
  if ((arrival == Arrival::kForwarded || arrival == Arrival::kForwardedWhole) && n.port.steered.steer(info)) {
    e.counters.add_device(kSteeredFlows);
    n.receivers_changed();
    const uint64_t one = 1;
    (void)!write(n.port.wake_fd, &one, sizeof one);  // the network thread watches one more socket
  }
  // Packet faults on the way in (SOFTVERBS_FAULTS packet=...,dir=in).
  int copies = 1;
  if (__builtin_expect(faults::packets_armed(), 0)) {
    switch (faults::packet_fault(true, info.src, pkt.bth.dest_qp, pkt.bth.opcode).fault) {
      case faults::PacketFault::kDrop:
        return;
      case faults::PacketFault::kCorrupt:  // what a packet with a bad ICRC comes to
        e.counters.add_device(kIcrcErrors);
        return;
      case faults::PacketFault::kDuplicate:
        copies = 2;
        break;
      default:
        break;
    }
  }
  Capture& cap = Capture::get();
  if (__builtin_expect(cap.enabled(), 0))
    cap.packet(info.src, info.dst, info.src_port, local_port, info.traffic_class, pkt, pkt.payload, pkt.payload_len);
  PacketAddrs from{info.src, info.dst, info.traffic_class, info.hop_limit, sender_slot};
  if (batch) {
    batch->commit(from, len);
    if (copies == 2) {
      const net::RocePacket again = batch->last_packet();
      batch->add(again, from, len);
    }
    return;
  }
  for (int i = 0; i < copies; ++i) {
    EngineLock g(e);
    e.receive(pkt, from, len);
  }
}

// At exit: leave the port's group, then hand what was queued for other
// processes on; what is for us is dropped (our QPs are going). Only the
// wire codec and sockets are used: other statics may be gone by now.
void hand_over_at_exit() {
  if (!g_nic || !g_nic->started.load(std::memory_order_acquire)) return;
  Nic& n = *g_nic;
  n.engine.finish_sends();  // the last ACKs of a ping-pong: held for a post that will not come, or being sent
  std::lock_guard rx(n.rx_mu);
  n.port.sock.leave_group();
  static ReceiveSlots* slots = new ReceiveSlots;  // (never freed: we are exiting)
  uint8_t* payloads[kSlots];
  for (int s = 0; s < kSlots; ++s) payloads[s] = slots->at(s) + net::kDatagramHeadroom;
  ssize_t lens[kSlots];
  uint16_t segs[kSlots];
  DatagramInfo infos[kSlots];
  // (The steered flows' sockets stay open: they bring only their flow,
  // mostly our own packets, until the process is gone.)
  const size_t steered = n.port.steered.count();
  for (size_t i = 0; i < 2 + steered; ++i) {
    const int fd = i == 0 ? n.port.sock.fd4() : i == 1 ? n.port.sock.fd6() : n.port.steered.fd(i - 2);
    const uint16_t port = i < 2 ? n.port.sock.receive_port(i == 0) : net::kRoceUdpPort;
    for (int got = kSlots; fd >= 0 && got == kSlots;) {
      got = n.port.sock.receive_many(fd, payloads, kSlotBytes, kSlots, lens, segs, infos);
      for (int s = 0; s < got; ++s)
        for_each_segment(slots->at(s), lens[s], segs[s], [&](uint8_t* buf, size_t len) {
          if (len < net::kBthBytes + net::kIcrcBytes) return;
          net::DatagramAddrs a{infos[s].src, infos[s].dst, infos[s].src_port, port};
          if (!net::datagram_icrc_ok(a, buf, len)) return;
          uint8_t* at = buf + net::kDatagramHeadroom;
          const uint32_t qpn = net::be::get24(at + 5);  // BTH DestQP
          // (Multicast: every member process got its own copy.)
          if (const uint32_t owner = shm::qpn_owner(qpn); qpn != shm::kMulticastQpn && owner != n.slot)
            n.port.fwd.forward(owner, infos[s], port, at, len);
        });
    }
  }
  n.port.fwd.remove_name();  // (a killed process's is removed by the slot's next owner)
}

// A GRO buffer (`len` bytes of `seg`-byte datagrams at slot +
// kDatagramHeadroom) whose datagrams are all for QPs of one other process
// goes to it in one message, ICRCs unchecked (checking one overwrites the
// end of the one before it: the receiver checks them). True if it went.
bool forward_whole(Nic& n, uint8_t* slot, size_t len, uint16_t seg, const DatagramInfo& info,
                   uint16_t local_port) {
  const uint8_t* data = slot + net::kDatagramHeadroom;
  const uint32_t owner = hostd::whole_buffer_slot(data, len, seg, shm::qpn_owner);
  if (!owner || owner == n.slot) return false;
  if (!n.port.fwd.forward(owner, info, local_port, data, len, seg)) return false;
  n.engine.counters.add_device(kForwarded, (len + seg - 1) / seg);
  return true;
}

// The host service closed our connection (it stopped, or is restarting):
// the network thread joins the next one (rejoin_service). Meanwhile, with
// kernel steering, our datagrams go on reaching our member sockets; those
// the service handed on wait for its return.
void lose_service(Nic& n) {
  SV_WARN("the host service (softverbs-hostd) closed its connection: this process joins it again when it "
          "returns (its QPs keep their numbers; RC connections retry meanwhile)");
  n.port.service.store(nullptr, std::memory_order_release);
  n.receivers_changed();
  n.service_lost_ns = monotonic_ns();
  n.next_service_try_ns = 0;
}

// Connects to the service that came back (or that came, for a process that
// held the port until then) and asks for our slot again, with the sockets
// we have. Tries every 50 ms for the first 2 s after the loss, then every
// half second. Network thread only.
void rejoin_service(Nic& n) {
  const uint64_t now = monotonic_ns();
  n.next_service_try_ns = now + (now - n.service_lost_ns < 2'000'000'000 ? 50'000'000 : 500'000'000);
  shm::HostService* const svc = shm::Host::get()->service();
  if (!svc) return;
  bool refused = false;
  // (Only this thread changes the sockets: reading them needs no lock.)
  if (!svc->rejoin(n.slot, n.port.sock.fd4(), n.port.sock.fd6(), n.port.sock.send_fd(true), n.port.sock.send_fd(false),
                   &refused)) {
    n.service_refused = refused;  // (said by rejoin)
    return;
  }
  {
    std::lock_guard rx(n.rx_mu);
    EngineLock g(n.engine);
    const int new4 = svc->take_steered_socket(true), new6 = svc->take_steered_socket(false);
    if (new4 >= 0 || new6 >= 0) n.port.sock.replace_receivers(new4, new6);
    else if (!svc->steered()) n.port.sock.replace_receivers(-1, -1);  // (it hands our datagrams on itself)
    n.port.attestation.store(svc->attestation(), std::memory_order_release);
    n.port.own_slot.store(n.slot, std::memory_order_relaxed);
    n.port.channels.forget_dead_peers();  // (those that ended while no service could tell us)
    n.port.channels.forget_unanswered_asks();  // (the service that was asked is gone)
    n.port.service.store(svc, std::memory_order_release);
    n.receivers_changed();
  }
  svc->network_up();
  SV_WARN("joined the host service again (slot %u, %s): RoCEv2 datagrams for this process's QPs reach it",
          n.slot, svc->steered() ? "the kernel steers them" : "through the service");
}

// A process that started without a service looks for one every second: one
// that came needs UDP port 4791, which we hold (or tried to). We let it go
// and join the service. A squatter of the service's name (a uid we do not
// trust) is not one. Network thread only.
void look_for_service(Nic& n, uint32_t trusted_uid) {
  n.next_service_try_ns = monotonic_ns() + 1'000'000'000;
  uint32_t untrusted;
  const int probe = connect_host_service(&untrusted, trusted_uid);
  if (probe < 0) return;
  close(probe);
  SV_WARN("a host service (softverbs-hostd) started in this network namespace: this process hands it UDP port %u "
          "and joins it",
          net::kRoceUdpPort);
  {
    std::lock_guard rx(n.rx_mu);
    EngineLock g(n.engine);
    n.port.sock.release_port();
    n.port.steered.close();  // (connected sockets on the port too)
    n.port.fwd.close();
    n.port.fwd.remove_name();
    n.receivers_changed();
  }
  shm::Host::get()->adopt_service(shm::HostService::unconnected());
  n.under_service = true;
  n.service_lost_ns = monotonic_ns();
  n.next_service_try_ns = 0;
}

// Which of the receiving sockets to read: the IPv4 and IPv6 UDP sockets,
// the forwarding socket, and the steered flows' sockets (bit i: the i-th);
// an empty one costs a system call.
struct Readable {
  bool v4 = true, v6 = true, forwarded = true;
  uint64_t steered = ~uint64_t{0};
  bool rung = false;  // a peer rang the bell of our rings
  bool any() const { return v4 || v6 || forwarded || steered || rung; }
};
static_assert(SteeredFlows::kMax <= 64);

// At most this many receiving descriptors (receiving_fds).
constexpr size_t kMaxBells = 64;  // (the host service makes at most 64 ring pairs a process)
constexpr size_t kMaxReceivingFds = 3 + kMaxBells + SteeredFlows::kMax;
static_assert(kMaxReceivingFds <= ReceiveWatch::kMaxMembers);

// The receiving descriptors as poll() takes them: IPv4, IPv6, the host
// service's connection or else the forwarding socket, the bells of our
// rings (roce_peer_channels.h), then the steered flows' sockets. Returns how
// many; *bells says how many bells.
size_t receiving_fds(const Nic& n, pollfd fds[kMaxReceivingFds], size_t* bells = nullptr) {
  shm::HostService* const service = n.port.service.load(std::memory_order_acquire);
  fds[0] = {n.port.sock.fd4(), POLLIN, 0};
  fds[1] = {n.port.sock.fd6(), POLLIN, 0};
  fds[2] = {service ? service->fd() : n.port.fwd.fd(), POLLIN, 0};
  int bell_fds[kMaxBells];
  const size_t nb = n.port.channels.bells(bell_fds, kMaxBells);
  for (size_t i = 0; i < nb; ++i) fds[3 + i] = {bell_fds[i], POLLIN, 0};
  if (bells) *bells = nb;
  const size_t steered = n.port.steered.count();
  for (size_t i = 0; i < steered; ++i) fds[3 + nb + i] = {n.port.steered.fd(i), POLLIN, 0};
  return 3 + nb + steered;
}

// Which of them poll() found holding something. (A rung bell is read here,
// before the rings are: a ring after that wakes the next poll.)
Readable readable_of(const pollfd* fds, size_t count, size_t bells) {
  Readable r{(fds[0].revents & POLLIN) != 0, (fds[1].revents & POLLIN) != 0,
             (fds[2].revents & (POLLIN | POLLHUP)) != 0, 0};
  for (size_t i = 3; i < 3 + bells; ++i)
    if (fds[i].revents & POLLIN) {
      uint64_t rings;
      (void)!read(fds[i].fd, &rings, sizeof rings);
      r.rung = true;
    }
  for (size_t i = 3 + bells; i < count; ++i)
    if (fds[i].revents & POLLIN) r.steered |= uint64_t{1} << (i - 3 - bells);
  return r;
}

// Receives and handles what the rings from other users' processes hold, at
// most `budget` datagrams. Caller holds n.rx_mu.
// Datagrams taken from the rings before one of them closes: more than a
// ring of the smallest records holds.
constexpr int kDrainBeforeClose = 65536;

void drain_channels(Nic& n, ReceiveSlots& slots, int budget) {
  Engine& e = n.engine;
  constexpr size_t stride = net::kDatagramHeadroom + kSlotBytes;
  for (int left = budget; left > 0;) {
    int got;
    {
      EngineBatch batch(e);
      got = n.port.channels.take(slots.at(0), stride, net::kDatagramHeadroom, std::min(left, kSlots),
                                 [&](uint32_t peer, const shm::PeerRecord& r, uint8_t* buf, size_t len) {
                                   const DatagramInfo info{r.src, r.dst, r.src_port, r.traffic_class, 64};
                                   handle_datagram(n, buf, len, info, net::kRoceUdpPort, Arrival::kChannel, peer,
                                                   &batch);
                                 });
    }
    if (got) e.counters.add_device(kRingDatagrams, static_cast<uint64_t>(got));
    e.hand_over_answers();
    if (got < kSlots) return;
    left -= got;
  }
  // (The budget ran out with the rings still holding some: wake the network
  // thread for the rest.)
  if (n.port.channels.any_ready()) n.port.channels.ring_own_bell();
}

// Receives and handles what waits on UDP socket `fd` (port `local_port`),
// at most `budget` datagrams. Caller holds n.rx_mu.
void drain_socket(Nic& n, ReceiveSlots& slots, int fd, uint16_t local_port, int budget) {
  Engine& e = n.engine;
  uint8_t* payloads[kSlots];
  for (int s = 0; s < kSlots; ++s) payloads[s] = slots.at(s) + net::kDatagramHeadroom;
  ssize_t lens[kSlots];
  uint16_t segs[kSlots];
  DatagramInfo infos[kSlots];
  for (int left = budget; left > 0;) {
    int got = n.port.sock.receive_many(fd, payloads, kSlotBytes, std::min(left, kSlots), lens, segs, infos);
    {
      EngineBatch batch(e);
      for (int s = 0; s < got; ++s) {
        if (lens[s] > 0 && forward_whole(n, slots.at(s), static_cast<size_t>(lens[s]), segs[s], infos[s], local_port))
          continue;
        for_each_segment(slots.at(s), lens[s], segs[s], [&](uint8_t* buf, size_t len) {
          handle_datagram(n, buf, len, infos[s], local_port, Arrival::kWire, 0, &batch);
        });
      }
    }
    e.hand_over_answers();
    if (got < kSlots) break;
    left -= got;
  }
}

// Receives and handles what waits on the sockets, at most `budget`
// datagrams per socket. Caller holds n.rx_mu.
void drain(Nic& n, ReceiveSlots& slots, int budget, Readable readable = {}) {
  Engine& e = n.engine;
  // The steered flows first: once a flow has its own socket, the bulk of
  // this process's packets come there.
  const size_t steered = n.port.steered.count();
  for (size_t i = 0; i < steered; ++i)
    if (readable.steered & (uint64_t{1} << i)) drain_socket(n, slots, n.port.steered.fd(i), net::kRoceUdpPort, budget);
  if (n.port.sock.fd4() >= 0 && readable.v4) drain_socket(n, slots, n.port.sock.fd4(), n.port.sock.receive_port(true), budget);
  if (n.port.sock.fd6() >= 0 && readable.v6) drain_socket(n, slots, n.port.sock.fd6(), n.port.sock.receive_port(false), budget);
  uint8_t* payloads[1] = {slots.at(0) + net::kDatagramHeadroom};
  DatagramInfo info;
  uint16_t port, seg;
  for (int k = 0; readable.forwarded && k < budget; ++k) {
    const ssize_t got = n.port.fwd.receive(payloads[0], kSlotBytes, &info, &port, &seg);
    if (got < 0) break;
    const Arrival how = seg ? Arrival::kForwardedWhole : Arrival::kForwarded;
    for_each_segment(slots.at(0), got, seg, [&](uint8_t* buf, size_t len) { handle_datagram(n, buf, len, info, port, how); });
    if (k % 16 == 15) e.hand_over_answers();
  }
  if (const uint64_t foreign = n.port.fwd.take_foreign()) e.counters.add_device(kForeignSenders, foreign);
  shm::HostService* const service = n.port.service.load(std::memory_order_acquire);
  for (int k = 0; readable.forwarded && service && k < budget; ++k) {
    hostd::DatagramHeader h;
    const ssize_t got = service->receive(payloads[0], kSlotBytes, &h);
    if (got < 0) {
      if (errno == EPIPE) lose_service(n);
      break;
    }
    const DatagramInfo from{h.src, h.dst, h.src_port, h.traffic_class, h.hop_limit};
    for_each_segment(slots.at(0), got, h.seg, [&](uint8_t* buf, size_t len) {
      handle_datagram(n, buf, len, from, h.dst_port, Arrival::kFromService,
                      (h.flags & hostd::kFromProcess) ? h.sender_slot : 0);
    });
    if (k % 16 == 15) e.hand_over_answers();
  }
  // Rings the service made (or whose peer went), met on its connection:
  // before the rings are read (a ring whose peer is gone is read no more).
  if (service) {
    bool opened = false;
    for (shm::HostService::ChannelEvent& ev : service->take_channel_events()) {
      if (ev.open) {
        n.port.channels.open(ev.peer_slot, ev.peer_pid, ev.fds, ev.count);
        n.receivers_changed();
        opened = true;
      } else {
        // What the peer wrote before it went is taken first (the ACK of a
        // ping-pong's last message, sent as its process exits): it was
        // sent by that process, whose slot no one has again until the
        // service hears that we let go (its quarantine). A bounded drain:
        // a ring holds at most 4 MiB.
        if (n.port.channels.any_ready()) drain_channels(n, slots, kDrainBeforeClose);
        n.port.channels.close(ev.peer_slot);
        n.receivers_changed();
        n.has_retired_bells.store(true, std::memory_order_release);
      }
    }
    if (opened) {  // (the network thread watches the new bell from its next poll)
      const uint64_t one = 1;
      (void)!write(n.port.wake_fd, &one, sizeof one);
    }
  }
  if (n.port.channels.any_ready()) drain_channels(n, slots, budget);
  e.hand_over_answers();
}

// The network thread's first nap while an application thread drains the
// sockets itself (network_thread).
constexpr uint64_t kFirstNapNs = 5'000;

void network_thread(Nic* nic) {
  pthread_setname_np(pthread_self(), "softverbs-net");
  // Woken by a packet, this thread must get a core now, though polling
  // applications hold them all (util/short_slice.h).
  if (const unsigned us = knobs().net_slice_us; us && !request_short_slice(uint64_t{us} * 1000))
    SV_DEBUG("network thread: the kernel kept its default scheduler slice");
  Nic& n = *nic;
  Engine& e = n.engine;
  // Its naps (below) start short: the kernel's default 50 us of timer
  // slack would make them several times longer.
  const uint64_t max_nap_ns = uint64_t{knobs().net_nap_us} * 1000;
  if (max_nap_ns) prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  uint64_t nap_ns = 0;        // this nap's length (0: watching the sockets)
  uint64_t nap_start_ns = 0;  // when it began
  ReceiveSlots slots;
  uint64_t next_try_ns = 0;  // when a process without the RoCE port tries to bind it again
  // (The knobs, read now: a test may change them while this thread runs.)
  const bool look_for_services = host_service_wanted();
  const uint32_t trusted_uid = host_service_uid();
  for (;;) {
    // Without the port (or a service that has it), look for it again
    // every second: its owner may be gone. Under a service that went,
    // join it again as soon as it is back; without one, look for one
    // every second.
    shm::HostService* const service = n.port.service.load(std::memory_order_acquire);
    const bool owner = n.port.sock.owns_roce_port() || service;
    const bool rejoining = n.under_service && !service && !n.service_refused;
    const bool looking = !n.under_service && look_for_services;
    pollfd fds[kMaxReceivingFds + 2];
    // Bells of closed channels go now, while no poll watches them.
    if (n.has_retired_bells.exchange(false, std::memory_order_acq_rel)) {
      std::lock_guard rx(n.rx_mu);
      n.port.channels.close_retired();
      n.receivers_changed();
    }
    size_t bells = 0;
    const size_t receiving = receiving_fds(n, fds, &bells);
    pollfd& timer = fds[receiving];
    pollfd& wake = fds[receiving + 1];
    timer = {n.port.timer_fd, POLLIN, 0};
    wake = {n.port.wake_fd, POLLIN, 0};
    // An application thread that polls an empty CQ drains the sockets
    // itself (RoceTransport::progress). Woken for the same packets, this
    // thread would only take a core from it: the packet's sender wakes it
    // on its own core, so on a busy machine the two processes' network
    // threads end up taking turns on one core while the pollers wait on
    // rx_mu (ib_send_lat between two namespaces: 3x slower). So while an
    // application thread drains, this thread watches the timers only, in
    // naps that double while the application goes on draining (up to
    // net_nap_us); when it has stopped (its completion came, or it now
    // spins on memory that a WRITE will fill), the thread watches the
    // sockets again. A poller that leaves waits for it at most about as
    // long as it had been polling.
    const uint64_t now = monotonic_ns();
    const uint64_t drained = n.app_drained_ns.load(std::memory_order_relaxed);
    if (!max_nap_ns) {
      nap_ns = 0;
    } else if (nap_ns) {  // after a nap: is the application still draining?
      // It is if it drained during the nap, or came to drain less than
      // kPollingNs before the nap began: a nap cut short by the alarm, or
      // shorter than the application's handling of the message it just
      // took, can hold no drain of its own; nor can one during which the
      // application was off its core (this thread's own wake-up may have
      // taken it). Back on the sockets then, this thread took the
      // poller's next packet, woken on the core of one of the pollers
      // (ucx_perftest tag_lat over rc_verbs between two namespaces: this
      // thread received 761-1113 of 20000 messages; 50-397 with this test),
      // and each such wake-up preempts a poller again (an MPI ping-pong
      // between two hosts on two cores: p90 of 8-byte messages 20-22 us
      // with the nap counted, 31-37 us without).
      const bool polling = drained >= nap_start_ns ||
                           now - n.app_polled_ns.load(std::memory_order_relaxed) < kPollingNs + nap_ns;
      nap_ns = polling ? std::min(2 * nap_ns, max_nap_ns) : 0;
    } else if (now - drained < kDrainGapNs) {
      nap_ns = kFirstNapNs;
    }
    nap_start_ns = now;
    // Napping, this thread is the timers' alarm: its nap ends by the
    // first timer due (at least kFirstNapNs on: one due already is the
    // application's to meet, held answers it sends at its next poll), and
    // the timerfd is armed only for what an application thread makes due
    // sooner (Engine::looks_by_ns). Watching the sockets, it sleeps
    // until the alarm.
    // (looks_by_ns is written by this thread alone, and by a fork child
    // before it has one: read here without mu.)
    uint64_t timers_due_ns = UINT64_MAX;  // when this nap ends with a timer due
    if (nap_ns || e.looks_by_ns) {
      std::lock_guard g(e.mu);
      if (nap_ns) {
        const uint64_t due = e.next_deadline();
        if (due && due < now + nap_ns) {
          nap_ns = std::max(due, now + kFirstNapNs) - now;
          timers_due_ns = now + nap_ns;
        }
        e.looks_by_ns = now + nap_ns;
      } else if (e.looks_by_ns) {
        e.looks_by_ns = 0;
        e.arm_timer();
      }
    }
    if (nap_ns)
      for (size_t i = 0; i < receiving; ++i) fds[i].fd = -1;
    // Watching the sockets itself, this thread cancels the watch of an
    // application thread that stopped polling a while ago
    // (receive_watch.h): else that thread would be woken too for each
    // packet, wherever it sleeps. (Not sooner: a poller that pauses comes
    // back, and each cancel costs it an arm.)
    if (!nap_ns && n.watch.armed() && now - n.app_polled_ns.load(std::memory_order_relaxed) > kWatchIdleNs) {
      std::lock_guard rx(n.rx_mu);
      n.watch.disarm();
    }
    const timespec nap{0, static_cast<long>(nap_ns)}, second{1, 0}, soon{0, 50'000'000};
    const timespec* timeout = nap_ns ? &nap : rejoining ? &soon : owner && !looking ? nullptr : &second;
    if (ppoll(fds, receiving + 2, timeout, nullptr) < 0 && errno != EINTR) return;
    if (wake.revents & POLLIN) {  // a steered flow's socket to watch from the next round on
      uint64_t count;
      (void)!read(n.port.wake_fd, &count, sizeof count);
    }
    // A nap that ended with no timer due: nothing to do. (Taking the engine
    // lock for nothing would make the draining application thread wait, or
    // this thread spin for it on a core the application needs.)
    // (Nor when only the once-a-second look for the port or a host service
    // is on: it waits for its second.)
    const uint64_t woke = monotonic_ns();
    const bool service_due = (rejoining || looking) && woke >= n.next_service_try_ns;
    if (nap_ns && owner && !service_due && !(timer.revents & POLLIN) && woke < timers_due_ns) continue;
    // (Memory that cannot be had drops what was in hand, as a lost packet;
    // the thread goes on.)
    try {
      if (timer.revents & POLLIN) {
        uint64_t expirations;
        (void)!read(n.port.timer_fd, &expirations, sizeof expirations);
        {
          std::lock_guard g(e.mu);
          e.armed_ns = 0;
        }
        if (__builtin_expect(faults::packets_armed(), 0)) n.port.release_held(monotonic_ns());
      }
      if (rejoining && monotonic_ns() >= n.next_service_try_ns) rejoin_service(n);
      if (looking && monotonic_ns() >= n.next_service_try_ns) look_for_service(n, trusted_uid);
      if (!owner && !n.under_service && monotonic_ns() >= next_try_ns) {
        next_try_ns = monotonic_ns() + 1'000'000'000;
        std::lock_guard rx(n.rx_mu);
        EngineLock g(e);
        n.port.sock.try_own();
        n.receivers_changed();
      }
      // What this thread answers while an application thread polls (it
      // came to drain moments ago) is held for that thread's next post or
      // poll, as if it had drained itself (Engine::answers_held_ns). Sent
      // now, the ACK of a ping-pong's request leaves alone and the reply a
      // moment later, in a trip of its own; the peer, its completion found
      // by the ACK, spins on memory for that reply with nobody draining
      // for it but its network thread, which answers alone in turn: a
      // slow mode that lasted once entered (ib_write_lat between two
      // namespaces, 6 rounds: ~32 us typical; ~16 us held).
      HoldAnswers hold(monotonic_ns() - n.app_polled_ns.load(std::memory_order_relaxed) < kPollingNs);
      const Readable readable = readable_of(fds, receiving, bells);
      if (readable.any()) {
        std::lock_guard rx(n.rx_mu);
        e.counters.add_device(kThreadReceives);
        drain(n, slots, 256, readable);  // bounded, so timers get their turn
      }
      {
        EngineLock g(e);
        e.on_timers(monotonic_ns());
        e.rearm = true;  // the alarm, for whatever is due next
      }
      e.hand_over_answers();
    } catch (const std::bad_alloc&) {
      out_of_memory();
    }
  }
}

}  // namespace

}  // namespace roce

RoceTransport::RoceTransport() : nic_(*new roce::Nic()) {}  // (never freed: the network thread may outlive it)

void RoceTransport::listen() {
  if (nic_.started.load(std::memory_order_acquire)) return;
  std::lock_guard g(nic_.start_mu);
  if (nic_.started.load(std::memory_order_relaxed)) return;
  // The fork and exit handlers take no argument: they look after the
  // process's one started NIC (a second would be a second UDP port owner).
  if (roce::g_nic && roce::g_nic != &nic_) {
    SV_ERROR("a second RoCEv2 transport in one process: only the first one starts");
    return;
  }
  roce::g_nic = &nic_;
  roce::Engine& e = nic_.engine;
  static bool fork_handler = (pthread_atfork(nullptr, nullptr, roce::after_fork_in_child), true);
  (void)fork_handler;
  // The forwarding socket first: once in the port's group, packets for us
  // may arrive through any member.
  shm::Host* host = shm::Host::get();
  nic_.slot = host->slot();
  // With a host service, it owns the port and hands us our packets: we
  // send from an ephemeral port (RoCEv2 answers go to 4791 whatever the
  // source port) and forward nothing.
  shm::HostService* const service = host->service();
  nic_.port.service.store(service, std::memory_order_release);
  if (!service && !nic_.port.fwd.open(nic_.slot)) SV_WARN("no RoCEv2 forwarding socket: %s", strerror(errno));
  // With a service, we receive on our members of its port's groups (the
  // kernel steers our datagrams there), or through it; we send from ports
  // of our own, which it holds and vouches for as ours.
  const bool opened = service ? nic_.port.sock.adopt(service->take_steered_socket(true),
                                                     service->take_steered_socket(false))
                              : nic_.port.sock.open();
  if (!opened) {
    SV_WARN("no UDP socket for RoCEv2: %s", strerror(errno));
    nic_.port.fwd.close();
    return;
  }
  if (service) {
    service->attest(nic_.port.sock.send_fd(true), nic_.port.sock.send_fd(false));
    nic_.port.own_slot.store(nic_.slot, std::memory_order_relaxed);
    nic_.port.attestation.store(service->attestation(), std::memory_order_release);
    nic_.under_service = true;
  }
  static bool exit_handler = (std::atexit(roce::hand_over_at_exit), true);
  (void)exit_handler;
  if (knobs().io_uring && !nic_.watch.open()) SV_WARN("SOFTVERBS_IO_URING=1, but no io_uring here: an empty poll asks poll()");
  nic_.port.timer_fd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  nic_.port.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  {
    std::lock_guard g(e.mu);
    e.counters.open();
  }
  std::thread(roce::network_thread, &nic_).detach();
  if (service) service->network_up();
  nic_.started.store(true, std::memory_order_release);
}

Response RoceTransport::deliver(const Message& m) {
  listen();
  roce::Engine& e = nic_.engine;
  // Memory for a packet or a payload's copy that cannot be had is a packet
  // lost on the wire: UC and UD messages vanish, an RC message is tried
  // again after the ACK timeout (the requester's kNoResponse).
  try {
    roce::EngineLock g(e);
    if (m.qp_type == IBV_QPT_UD || m.qp_type == IBV_QPT_UC) return e.send_unreliable(m);
    return e.start_reliable(m);  // arms the network thread's alarm if need be (EngineLock)
  } catch (const std::bad_alloc&) {
    roce::out_of_memory();
    return Response{is_reliable(m.qp_type) ? Outcome::kNoResponse : Outcome::kDropped, 0};
  }
}

void RoceTransport::progress() {
  if (!nic_.started.load(std::memory_order_acquire)) return;
  roce::Engine& e = nic_.engine;
  const uint64_t now = monotonic_ns();  // (one clock read per poll: this runs on every empty poll)
  nic_.app_polled_ns.store(now, std::memory_order_relaxed);
  // What the last drain held for a post that did not come goes now.
  e.send_held_answers();
  {
    std::unique_lock rx(nic_.rx_mu, std::try_to_lock);
    if (!rx.owns_lock()) {
      // Another thread is at it, most often the network thread. If it was
      // preempted there (a polling application keeps every core busy), the
      // packets wait until it runs again, a whole time slice (milliseconds):
      // give it the core instead of spinning on.
      sched_yield();
      return;
    }
    nic_.app_drained_ns.store(now, std::memory_order_relaxed);
    try {
      // An application polling an empty CQ comes here over and over. The
      // watch says without a system call whether anything came; if so,
      // one system call says which sockets hold it (a receive on each
      // empty socket would cost three). Without the watch, that call is
      // made each time.
      pollfd fds[roce::kMaxReceivingFds];
      size_t bells = 0;
      const size_t count = roce::receiving_fds(nic_, fds, &bells);
      roce::ReceiveWatch& watch = nic_.watch;
      const uint64_t arms = watch.arms();
      const bool look =
          !watch.is_open() || watch.maybe_readable(fds, count, nic_.receivers_epoch.load(std::memory_order_acquire));
      if (watch.arms() != arms) e.counters.add_device(roce::kWatchArms);
      thread_local roce::ReceiveSlots slots;
      if (look && poll(fds, count, 0) > 0) {
        const roce::Readable readable = roce::readable_of(fds, count, bells);
        // (Counted as the network thread counts: a socket with only an
        // error to report, POLLERR, holds nothing to receive.)
        if (readable.any()) e.counters.add_device(roce::kAppReceives);
        roce::HoldAnswers hold(true);  // for this thread's next post (Engine::answers_held_ns)
        roce::drain(nic_, slots, 64, readable);
        watch.drained(true);
      } else {
        if (look) watch.drained(false);
        if (nic_.port.channels.any_ready()) {  // (the rings are memory: read without asking)
          roce::HoldAnswers hold(true);
          roce::drain(nic_, slots, 64, roce::Readable{false, false, false, 0});
        }
      }
    } catch (const std::bad_alloc&) {
      roce::out_of_memory();  // what was in hand is lost, as packets on a wire
    }
  }
  try {
    e.hand_over_answers();
  } catch (const std::bad_alloc&) {
    roce::out_of_memory();
  }
}

void RoceTransport::drop_sends(uint32_t qpn) {
  if (!nic_.started.load(std::memory_order_acquire)) return;
  roce::Engine& e = nic_.engine;
  // The answers held for a post (the ACK of the last message this process
  // received) leave now, as a NIC's left on receipt: rdma_disconnect moves
  // the QP to ERR, then sends its DREQ, which overtook the held ACK; the
  // peer, told to disconnect, flushed the send that ACK was for (libfabric's
  // fi_pingpong over verbs;ofi_rxm between hosts: "Work Request Flushed
  // Error" on the server after its last message, once in a CI run). The
  // caller holds the QP's sq_mu; its verb opened a DeferSends scope before
  // taking it, and they leave at the scope's end (core/deferred_sends.h),
  // before the verb returns (outside a scope, as this lock is let go).
  roce::EngineLock g(e);  // (its release sends them)
  e.answers_leave_at_release();
  if (auto it = e.senders.find(qpn); it != e.senders.end()) {
    e.drop_outbound(it->second);
    it->second.rnr_resume_ns = 0;
  }
}

void RoceTransport::copy_app_buffers() {
  if (!nic_.started.load(std::memory_order_acquire)) return;
  roce::Engine& e = nic_.engine;
  std::lock_guard g(e.mu);
  for (auto& [qpn, s] : e.senders)
    for (roce::Outbound& o : s.out) o.copy_payload();
}

void RoceTransport::ready_to_send(uint32_t qpn, const SendParams& p, SendAnswers& answers) {
  roce::Engine& e = nic_.engine;
  std::lock_guard g(e.mu);
  e.ready_to_send(qpn, p, answers);
}

void RoceTransport::forget_qp(uint32_t qpn, bool wait) {
  // (Even before the engine started: ready_to_send() may have told it of the QP.)
  roce::Engine& e = nic_.engine;
  {
    std::unique_lock<BriefSpinMutex> c;
    if (wait) c = std::unique_lock(e.call_mu);
    std::lock_guard g(e.mu);
    if (auto it = e.senders.find(qpn); it != e.senders.end()) {
      e.drop_outbound(it->second);
      e.senders.erase(it);
    }
    e.receivers.erase(qpn);
    e.counters.forget(qpn);
  }
  // Its last ACK may be held for a post that will not come, or in the
  // network thread's hands (an application destroys its QPs after the
  // last completion, then exits).
  e.finish_sends();
}

}  // namespace sv
