#include "transport/roce_host_targets.h"

#include <cstring>

#include "core/responder.h"
#include "shm/host.h"
#include "shm/layout.h"

namespace sv::roce {
namespace {

const shm::Peer& owner_of(const TargetQp& t) { return *static_cast<const shm::Peer*>(t.owner); }
shm::QpShared& shared_of(const TargetQp& t) { return *static_cast<shm::QpShared*>(t.state); }

}  // namespace

bool HostTargets::find(uint32_t qpn, TargetQp* out) {
  shm::Host* host = shm::Host::get();
  const shm::Peer* p = host ? host->peers().get(host->qpn_owner(qpn)) : nullptr;
  if (!p) return false;
  auto* entry = p->at<shm::QpSlotEntry>(p->header()->qp_table + shm::qpn_index(qpn) * sizeof(shm::QpSlotEntry));
  if (!entry || entry->qpn.load(std::memory_order_acquire) != qpn) return false;
  auto* t = p->at<shm::QpShared>(entry->shared_off.load(std::memory_order_acquire));
  if (!t || t->qpn != qpn) return false;
  out->qpn = qpn;
  out->type = t->type;
  out->dest_qpn = t->dest_qpn;
  std::memcpy(&out->dgid, &t->dgid, sizeof out->dgid);
  out->path_mtu = t->path_mtu;
  out->max_dest_rd_atomic = t->max_dest_rd_atomic;
  out->rq_psn = t->rq_psn;
  out->owner = p;
  out->state = t;
  return true;
}

Response HostTargets::respond(const TargetQp& t, const Message& m) {
  return sv::respond(shm::Host::get()->peers(), owner_of(t), shared_of(t), m);
}

Response HostTargets::place_write(const TargetQp& t, const Message& m, uint64_t offset, const uint8_t* data,
                                  uint32_t len) {
  return place_write_packet(shm::Host::get()->peers(), owner_of(t), shared_of(t), m, offset, data, len);
}

}  // namespace sv::roce
