#include "transport/shm_transport.h"

#include "core/gid_table.h"
#include "core/multicast.h"
#include "core/responder.h"

namespace sv {

Response ShmTransport::deliver(const Message& m) {
  if (m.qp_type == IBV_QPT_UD && m.dst.qpn == shm::kMulticastQpn && gid_is_multicast(m.dst.dgid))
    return deliver_to_group(m);
  return deliver_to_qp(m);
}

// Every QP of the host attached to the group gets its own copy (the sender
// too, when it is attached: multicast loopback is on by default).
Response ShmTransport::deliver_to_group(const Message& m) {
  for (uint32_t qpn : mcast_members(*host_.registry().header(), m.dst.dgid)) {
    Message copy = m;
    copy.dst.qpn = qpn;
    deliver_to_qp(copy);
  }
  return Response{Outcome::kAck, 0};
}

Response ShmTransport::deliver_to_qp(const Message& m) {
  const Response lost{m.qp_type == IBV_QPT_RC ? Outcome::kNoResponse : Outcome::kDropped, 0};
  const shm::Peer* owner = host_.peers().get(shm::qpn_slot(m.dst.qpn));
  if (!owner) return lost;  // no such process, or it died
  uint32_t idx = shm::qpn_index(m.dst.qpn);
  auto* entry = owner->at<shm::QpSlotEntry>(owner->header()->qp_table + idx * sizeof(shm::QpSlotEntry));
  if (!entry || entry->qpn.load(std::memory_order_acquire) != m.dst.qpn) return lost;
  auto* target = owner->at<shm::QpShared>(entry->shared_off.load(std::memory_order_acquire));
  if (!target || target->qpn != m.dst.qpn) return lost;
  return respond(host_.peers(), *owner, *target, m);
}


}  // namespace sv
