// Lifetime and options of an rdma_cm_id: rdma_create_id, rdma_destroy_id,
// rdma_migrate_id, rdma_set_option, rdma_get_src_port / rdma_get_dst_port.
#include <netinet/in.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "cm_faults.h"
#include "c_boundary.h"
#include "cm_address.h"
#include "cm_network.h"
#include "cm_state.h"
#include "cm_link.h"
#include "util/raw_enum.h"

namespace sv::rdmacm {
namespace {

unsigned queued_events_of(const Id* id) {
  unsigned n = 0;
  if (auto* ch = channel_of(id->pub.channel))
    for (const Event* ev : ch->queue) n += ev->counted == id;
  return n;
}

// Waits until the user has acked every event of `id` it retrieved.
void wait_for_acks(Id* id, CmLock& lock) {
  cm_acked().wait(lock, [id] {
    return id->events_acked + queued_events_of(id) >= id->events_reported;
  });
}

// `ps` comes from the application and may hold any value: read it as an
// int (loading an out-of-range enum is undefined behaviour).
bool valid_port_space(const rdma_port_space& ps) {
  const int raw = sv::raw_enum(ps);
  return raw == RDMA_PS_TCP || raw == RDMA_PS_UDP || raw == RDMA_PS_IPOIB || raw == RDMA_PS_IB;
}

}  // namespace

Id* id_create(Channel* ch, void* context, rdma_port_space ps, ibv_qp_type qp_type, bool sync) {
  auto id = std::make_unique<Id>();
  if (!ch) {
    ch = channel_create();
    if (!ch) return nullptr;
    sync = true;
  }
  id->sync = sync;
  id->pub.channel = &ch->pub;
  id->pub.context = context;
  id->pub.ps = ps;
  id->pub.qp_type = qp_type;
  return id.release();
}

int complete_sync(Id* id) {
  if (!id->sync) return 0;
  if (id->pub.event) {
    rdma_ack_cm_event(id->pub.event);
    id->pub.event = nullptr;
  }
  Event* ev = nullptr;
  if (next_event(channel_of(id->pub.channel), &ev) != 0) return -1;
  id->pub.event = &ev->pub;
  const int status = ev->pub.status;
  if (status == 0) return 0;
  if (ev->pub.event == RDMA_CM_EVENT_REJECTED) return fail(ECONNREFUSED);
  return fail(status < 0 ? -status : status);
}

}  // namespace sv::rdmacm

using namespace sv::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_create_id(struct rdma_event_channel* channel,
                                                      struct rdma_cm_id** out, void* context,
                                                      enum rdma_port_space ps) {
  if (!out || !valid_port_space(ps)) return fail(EINVAL);
  if (int e = call_fault(sv::faults::Call::kRdmaCreateId)) return fail(e);  // (SOFTVERBS_FAULTS)
  return guarded(-1, [&] {
    const ibv_qp_type qp_type =
        (ps == RDMA_PS_UDP || ps == RDMA_PS_IPOIB) ? IBV_QPT_UD : IBV_QPT_RC;
    Id* id = id_create(channel_of(channel), context, ps, qp_type, false);
    if (!id) return -1;
    *out = &id->pub;
    return 0;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_destroy_id(struct rdma_cm_id* cm_id) {
  if (!cm_id) return fail(EINVAL);
  return guarded(-1, [&] {
    Id* id = id_of(cm_id);
    if (id->pub.event) {
      rdma_ack_cm_event(id->pub.event);
      id->pub.event = nullptr;
    }
    CmLock lock(cm_mutex());
    for (Multicast& mc : id->multicasts)
      if (mc.attached && id->pub.qp) ibv_detach_mcast(id->pub.qp, &mc.mgid, 0);
    id->multicasts.clear();
    // Unretrieved events go with the id, as the kernel discards them;
    // retrieved ones must be acked first (rdma_destroy_id(3)).
    drop_queued_events(id);
    net_close(id);
    stop_waiting_for_listener(id);
    link_close(id);
    link_listener_gone(id);
    watch_remove(id->sock_watch);
    if (id->sock >= 0) close(id->sock);
    id->sock = -1;
    release_port(id);
    wait_for_acks(id, lock);
    std::free(id->pub.route.path_rec);
    delete id->listen_qp_attr;
    if (id->sync) channel_destroy(channel_of(id->pub.channel));
    delete id;
    return 0;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_migrate_id(struct rdma_cm_id* cm_id,
                                                       struct rdma_event_channel* channel) {
  if (!cm_id) return fail(EINVAL);
  return guarded(-1, [&] {
    CmLock lock(cm_mutex());
    Id* id = id_of(cm_id);
    // A synchronous id already has a channel of its own (rdma-core: EINVAL).
    if (id->sync && !channel) return fail(EINVAL);
    Channel* to = channel ? channel_of(channel) : channel_create();
    if (!to) return -1;
    Channel* from = channel_of(id->pub.channel);
    if (to == from) return 0;
    watch_move(id, from, to);
    link_migrate(id, from, to);
    net_migrate(id, from, to);
    const bool was_sync = id->sync;
    // The last event of a synchronous id is kept in id->event until the
    // next call (complete_sync); leaving synchronous mode acks it, as
    // rdma-core does, or the wait below would never end (libfabric's verbs
    // provider migrates the id of rdma_create_ep to its own channel).
    if (was_sync && id->pub.event) {
      rdma_ack_cm_event(id->pub.event);
      id->pub.event = nullptr;
    }
    id->pub.channel = &to->pub;
    id->sync = channel == nullptr;
    wait_for_acks(id, lock);
    if (was_sync) channel_destroy(from);
    return 0;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_set_option(struct rdma_cm_id* cm_id, int level,
                                                       int optname, void* optval,
                                                       size_t optlen) {
  if (!cm_id || !optval) return fail(EINVAL);
  CmLock lock(cm_mutex());
  Id* id = id_of(cm_id);
  if (level == RDMA_OPTION_IB) {
    // Path records are an InfiniBand (not RoCE) feature.
    return optname == RDMA_OPTION_IB_PATH ? fail(EOPNOTSUPP) : fail(EINVAL);
  }
  if (level != RDMA_OPTION_ID) return fail(EINVAL);
  switch (optname) {
    case RDMA_OPTION_ID_TOS:
      if (optlen != sizeof(uint8_t)) return fail(EINVAL);
      id->tos = *static_cast<uint8_t*>(optval);
      id->tos_set = true;
      return 0;
    case RDMA_OPTION_ID_ACK_TIMEOUT:
      if (optlen != sizeof(uint8_t)) return fail(EINVAL);
      id->ack_timeout = *static_cast<uint8_t*>(optval);
      if (id->ack_timeout > 31) return fail(EINVAL);
      return 0;
    case RDMA_OPTION_ID_REUSEADDR:
      if (optlen != sizeof(int)) return fail(EINVAL);
      if (id->state != IdState::kIdle) return fail(EINVAL);
      id->reuseaddr = *static_cast<int*>(optval) != 0;
      return 0;
    case RDMA_OPTION_ID_AFONLY:
      if (optlen != sizeof(int)) return fail(EINVAL);
      if (id->state != IdState::kIdle) return fail(EINVAL);
      id->afonly = *static_cast<int*>(optval) != 0;
      return 0;
    default:
      return fail(EOPNOTSUPP);
  }
}

extern "C" SOFTVERBS_RDMACM_EXPORT __be16 rdma_get_src_port(struct rdma_cm_id* cm_id) {
  if (!cm_id) return 0;
  return htons(address_port(&cm_id->route.addr.src_addr));
}

extern "C" SOFTVERBS_RDMACM_EXPORT __be16 rdma_get_dst_port(struct rdma_cm_id* cm_id) {
  if (!cm_id) return 0;
  return htons(address_port(&cm_id->route.addr.dst_addr));
}
