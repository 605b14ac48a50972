// QP1 on the network path. The kernel's CM answers QP1 for a whole host;
// here whichever process receives a CM MAD (a UD SEND to QP1 with the GSI
// Q_Key) posts it to the mailbox of the connection manager it is for
// (ibcm/gsi_mailbox.h): a listener for a REQ or SIDR REQ, the addressed
// communication ID's process for the rest (a full mailbox is waited for a
// moment: see waiting_mailbox_socket). Where no mailbox takes it, the answer is
// the one Linux's CM gives for an unknown service or connection: a REJ
// (invalid service ID), a SIDR REP (unsupported), a DREP to a DREQ.
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <string>

#include "ibcm/cm_messages.h"
#include "ibcm/gsi_mailbox.h"
#include "net/roce_opcode.h"
#include "transport/roce_engine.h"
#include "util/log.h"

namespace sv::roce {
namespace {

using sv::ibcm::CmMessage;

int mailbox_socket() {
  static int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  return fd;
}

// The same, blocking for a moment: a unix datagram queue holds only
// net.unix.max_dgram_qlen datagrams (10 by default), and one mailbox takes
// the MADs of all the connections of its process (ibcm/gsi_mailbox.h), a
// burst of hundreds when it connects them at once (cmtime). Sent from this
// socket, a MAD for a full mailbox waits until its CM has read one, a
// few ms at most (SO_SNDTIMEO).
int waiting_mailbox_socket() {
  static int fd = [] {
    int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    const timeval wait{0, 10000};
    setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof wait);
    return s;
  }();
  return fd;
}

// Mailboxes that stayed full for the whole wait lately: their CM does not
// read now (a process that does not pump its channel), and waiting for it
// again would only hold up this thread, which carries data too. Until a
// MAD finds room in one, the MADs that find it full are dropped at once.
struct StuckMailboxes {
  std::mutex mu;
  std::string names[8];
  size_t next = 0;

  bool has(const std::string& name) {
    std::lock_guard g(mu);
    return std::find(std::begin(names), std::end(names), name) != std::end(names);
  }
  void set(const std::string& name, bool stuck) {
    std::lock_guard g(mu);
    auto it = std::find(std::begin(names), std::end(names), name);
    if (!stuck && it != std::end(names)) it->clear();
    if (stuck && it == std::end(names)) names[next++ % 8] = name;
  }
};
StuckMailboxes& stuck_mailboxes() {
  static auto* s = new StuckMailboxes;  // (never destroyed: the network thread posts during exit)
  return *s;
}

// 1: posted; 0: no such mailbox; -1: the mailbox is full (its CM is busy:
// the MAD is dropped, and the sender's retry comes later).
int post(const std::string& name, const sv::ibcm::MailboxHeader& h, const uint8_t* mad) {
  socklen_t len;
  const sockaddr_un un = sv::ibcm::mailbox_address(name, &len);
  uint8_t buf[sv::ibcm::kMailboxDatagram];
  std::memcpy(buf, &h, sizeof h);
  std::memcpy(buf + sizeof h, mad, sv::ibcm::kMadSize);
  const auto* to = reinterpret_cast<const sockaddr*>(&un);
  StuckMailboxes& stuck = stuck_mailboxes();
  if (sendto(mailbox_socket(), buf, sizeof buf, MSG_NOSIGNAL, to, len) == static_cast<ssize_t>(sizeof buf)) {
    stuck.set(name, false);
    return 1;
  }
  if (errno != EAGAIN && errno != ENOBUFS) return 0;
  if (stuck.has(name)) return -1;
  if (sendto(waiting_mailbox_socket(), buf, sizeof buf, MSG_NOSIGNAL, to, len) == static_cast<ssize_t>(sizeof buf))
    return 1;
  stuck.set(name, true);
  return -1;
}

// A REQ (or SIDR REQ) that found no listener is dropped the first time and
// rejected when it comes again (the sender's retry, 1 s later): a program
// that closes a listener and opens another on the same port (perftest -R
// does, between its two connections) is not caught between the two, where
// Linux's CM is quick enough never to be seen there.
bool seen_before(const in6_addr& from, uint32_t request_id) {
  struct Seen {
    in6_addr from;
    uint32_t id;
  };
  static std::mutex mu;
  static Seen recent[64];
  static size_t next = 0;
  std::lock_guard g(mu);
  for (const Seen& r : recent)
    if (r.id == request_id && std::memcmp(&r.from, &from, sizeof from) == 0) return true;
  recent[next++ % 64] = Seen{from, request_id};
  return false;
}

}  // namespace

void deliver_to_gsi(Engine& e, const net::RocePacket& pkt, const PacketAddrs& from) {
  using namespace sv::ibcm;
  if (pkt.bth.opcode != (net::kTransportUd | net::kSendOnly) || pkt.deth.qkey != kGsiQkey ||
      pkt.payload_len < kMadSize) {
    e.counters.add_device(kNoQp);
    return;
  }
  MailboxHeader h;
  std::memcpy(h.src_ip, &from.src, 16);
  std::memcpy(h.dst_ip, &from.dst, 16);
  h.traffic_class = from.traffic_class;
  h.hop_limit = from.hop_limit;
  h.pkey = pkt.bth.pkey;
  h.src_qpn = pkt.deth.src_qp;
  const std::span<const uint8_t> mad(pkt.payload, kMadSize);
  for (const std::string& name : mailboxes_for(mad)) {
    const int posted = post(name, h, pkt.payload);
    if (posted > 0) return;
    if (posted < 0) {
      e.counters.add_device(kNoQp);
      return;
    }
  }
  CmMessage in;
  if (decode(mad, in) != DecodeError::kNone) {
    e.counters.add_device(kNoQp);
    return;
  }
  uint32_t request_id = 0;
  if (const auto* req = std::get_if<Req>(&in.body)) request_id = req->local_comm_id;
  if (const auto* sidr = std::get_if<SidrReq>(&in.body)) request_id = sidr->request_id;
  if (request_id && !seen_before(from.src, request_id)) return;
  auto out = sv::ibcm::answer_for_nobody(in);
  if (!out) return;  // a late answer for a connection that is gone
  const auto bytes = encode(*out);
  net::RocePacket reply;
  reply.bth.opcode = net::kTransportUd | net::kSendOnly;
  reply.bth.dest_qp = pkt.deth.src_qp;
  reply.bth.pkey = pkt.bth.pkey;
  reply.deth.qkey = kGsiQkey;
  reply.deth.src_qp = kGsiQpn;
  EngineLock g(e);
  e.transmit(Engine::kRequests, kGsiQpn, from.dst, from.src, from.traffic_class, reply, bytes.data(), bytes.size());
}

}  // namespace sv::roce
