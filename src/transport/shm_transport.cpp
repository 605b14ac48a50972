#include "transport/shm_transport.h"

#include "core/gid_table.h"
#include "core/multicast.h"
#include "core/responder.h"
#include "transport/roce_capture.h"
#include "transport/shm_capture.h"

namespace sv {

ShmTransport::ShmTransport(shm::Host& host, Transport* wire)
    : host_(host), wire_(wire), capture_(roce::Capture::get().enabled()) {}


void ShmTransport::ready_to_send(uint32_t qpn, const SendParams& p, SendAnswers&) {
  connections_.open(qpn);  // (a UD QP's stays unused: it has no one target)
  if (__builtin_expect(capture_, 0)) roce::capture_ready(qpn, p);
}

void ShmTransport::forget_qp(uint32_t qpn, bool) {
  connections_.forget(qpn);
  if (__builtin_expect(capture_, 0)) roce::capture_forget(qpn);
}

Response ShmTransport::deliver(const Message& m) {
  if (__builtin_expect(capture_, 0)) return deliver_captured(m);
  if (m.qp_type == IBV_QPT_UD && m.dst_qpn == shm::kMulticastQpn && gid_is_multicast(m.dst->dgid))
    return deliver_to_group(m);
  return deliver_to_qp(m);
}

// The initiator writes the whole exchange, request and answer (shm_capture.h).
Response ShmTransport::deliver_captured(const Message& m) {
  const bool group = m.qp_type == IBV_QPT_UD && m.dst_qpn == shm::kMulticastQpn && gid_is_multicast(m.dst->dgid);
  const Response r = group ? deliver_to_group(m) : deliver_to_qp(m);
  roce::capture_shm_exchange(m, r);
  return r;
}

// Every QP of the host attached to the group gets its own copy (the sender
// too, when it is attached: multicast loopback is on by default, unless the
// sender was created with IBV_QP_CREATE_BLOCK_SELF_MCAST_LB); members on
// other hosts get the one RoCEv2 packet sent to the group's IP address on
// the link of the source GID (a loopback address names no link a group
// could be on).
Response ShmTransport::deliver_to_group(const Message& m) {
  if (wire_ && !gid_is_loopback(m.dst->sgid)) wire_->deliver(m);
  for (uint32_t qpn : mcast_members(*host_.registry().header(), m.dst->dgid)) {
    if (m.block_self_mcast && qpn == m.src_qpn) continue;
    Message copy = m;
    copy.dst_qpn = qpn;
    deliver_to_qp(copy);
  }
  return Response{Outcome::kAck, 0};
}

namespace {

// A connected QP's target as last found, if its owner is the same live
// process and the QP still has its number (a destroyed QP's block keeps its
// number but says RESET until it is reused, which the responder sees).
bool cached_target_valid(const ShmConnection& c, uint32_t qpn) {
  return c.target && c.proc->incarnation.load(std::memory_order_acquire) == c.owner_incarnation &&
         shm::proc_alive(*c.proc) && c.target->qpn == qpn;
}

}  // namespace

Response ShmTransport::deliver_to_qp(const Message& m) {
  ShmConnection* c = m.qp_type == IBV_QPT_UD ? nullptr : connections_.find(m.src_qpn);
  if (c && cached_target_valid(*c, m.dst_qpn)) return respond(host_.peers(), *c->owner, *c->target, m, &c->ahead);
  return deliver_uncached(m, c);
}

// (Out of line: its registers and stack are not the cached path's to set up.)
Response ShmTransport::deliver_uncached(const Message& m, ShmConnection* c) {
  const Response lost{is_reliable(m.qp_type) ? Outcome::kNoResponse : Outcome::kDropped, 0};
  const shm::Peer* owner = host_.peers().get(host_.qpn_owner(m.dst_qpn));
  // In another network namespace: another host, which our GID does not
  // reach (two namespaces both have 127.0.0.1; a packet to it stays home).
  const uint64_t ours = host_.registry().proc(host_.slot()).netns_ino;
  const bool elsewhere = owner && ours && owner->proc->netns_ino && ours != owner->proc->netns_ino;
  // With a host service, a slot that is none of our live processes' here
  // is another user's (or nobody's): the network path reaches it, through
  // the service, and neither process maps the other's memory.
  if ((!owner || elsewhere) && host_.service() && wire_ && m.qp_type == IBV_QPT_UD) return wire_->deliver(m);
  if (!owner || elsewhere) return lost;  // no such process, or it died
  uint32_t idx = shm::qpn_index(m.dst_qpn);
  auto* entry = owner->at<shm::QpSlotEntry>(owner->header()->qp_table + idx * sizeof(shm::QpSlotEntry));
  if (!entry || entry->qpn.load(std::memory_order_acquire) != m.dst_qpn) return lost;
  auto* target = owner->at<shm::QpShared>(entry->shared_off.load(std::memory_order_acquire));
  if (!target || target->qpn != m.dst_qpn) return lost;
  if (c) {
    c->proc = owner->proc;
    c->owner_incarnation = owner->incarnation;
    c->owner = owner;
    c->target = target;
  }
  return respond(host_.peers(), *owner, *target, m, c ? &c->ahead : nullptr);
}


}  // namespace sv
