// The connection calls: rdma_listen, rdma_get_request, rdma_connect,
// rdma_accept, rdma_reject(_ece), rdma_establish, rdma_disconnect,
// rdma_notify and the ECE calls. They send rendezvous messages; the
// answers arrive through the channel (cm_protocol.cpp).
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "cm_faults.h"
#include "c_boundary.h"
#include "cm_address.h"
#include "cm_device.h"
#include "cm_host_service.h"
#include "cm_link.h"
#include "cm_network.h"
#include "cm_protocol.h"
#include "cm_qp.h"
#include "cm_state.h"
#include "util/peer_credentials.h"

namespace sv::rdmacm {
namespace {

constexpr uint8_t kMaxDepth = RDMA_MAX_INIT_DEPTH;  // 0xff: "as much as the device allows"
constexpr int kListenBacklog = 4096;
constexpr uint8_t kRejVendorOptionNotSupported = 35;

bool is_ud(const Id* id) { return id->pub.qp_type == IBV_QPT_UD; }

// rdma-core's ucma_valid_param: connected port spaces need a QP or
// parameters, and no more RDMA READ/atomic depth than the device has.
bool valid_param(const Id* id, const rdma_conn_param* param) {
  if (id->pub.ps != RDMA_PS_TCP) return true;
  if (!id->pub.qp && !param) return false;
  if (!param || !id->device) return true;
  if (param->responder_resources != kMaxDepth &&
      param->responder_resources > id->device->max_responder_resources)
    return false;
  if (param->initiator_depth != kMaxDepth &&
      param->initiator_depth > id->device->max_initiator_depth)
    return false;
  return true;
}

}  // namespace

namespace {

// Another host, or with a host service another user of this one (no
// listener of ours has the port): the REQ goes to its QP1
// (cm_network.cpp), through the service.
void send_to_qp1(Id* id) {
  if (net_connect(id, id->waiting_req) == 0) return;
  const int err = errno;
  set_state(id, IdState::kFailed, "the REQ cannot be sent to the peer's QP1");
  queue_event(id, RDMA_CM_EVENT_UNREACHABLE, -err);
}

}  // namespace

void connect_refused(Id* id) {
  const bool ours_later = errno == ECONNREFUSED && listener_port_held(id);
  if (errno == ECONNREFUSED && !ours_later && host_service_runs()) return send_to_qp1(id);
  // Bound but not listening yet (qperf sends its port to the client before
  // it calls rdma_listen): the REQ waits for the listener, as the CM's REQ
  // retries give it time to. Nobody on the port: the remote CM rejects the
  // REQ (invalid service ID), as the kernel reports it.
  if (!ours_later || wait_for_listener(id, id->waiting_req) != 0) reject_unanswered(id);
}

// A REQ (or SIDR REQ) nobody on this host will answer.
void reject_unanswered(Id* id) {
  set_state(id, IdState::kFailed, "nobody on this host answers the REQ");
  if (id->pub.qp_type == IBV_QPT_UD) queue_event(id, RDMA_CM_EVENT_UNREACHABLE, 2 /* IB_SIDR_UNSUPPORTED */);
  else queue_event(id, RDMA_CM_EVENT_REJECTED, kRejInvalidServiceId);
}

namespace {

int do_reject(Id* id, const void* data, uint8_t len, uint16_t reason) {
  if (id->state != IdState::kRequestReceived) return fail(EINVAL);
  const uint8_t limit = is_ud(id) ? kSidrRepPrivateData : kRejPrivateData;
  if (data && len > limit) return fail(EINVAL);
  WireMessage msg = message_from(id, is_ud(id) ? MessageType::kSidrRep : MessageType::kRej);
  msg.reason = is_ud(id) ? 1 /* IB_SIDR_REJECT */ : reason;
  set_private_data(msg, data, len);
  send_message(id, msg);  // a peer already gone needs no answer
  stop_watching(id);
  set_state(id, IdState::kFailed, "rdma_reject");
  return 0;
}

}  // namespace
}  // namespace sv::rdmacm

using namespace sv::rdmacm;

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_listen(struct rdma_cm_id* cm_id, int backlog) {
  if (!cm_id) return fail(EINVAL);
  if (int e = call_fault(sv::faults::Call::kRdmaListen)) return fail(e);  // (SOFTVERBS_FAULTS)
  return guarded(-1, [&] {
    CmLock lock(cm_mutex());
    Id* id = id_of(cm_id);
    if (id->state == IdState::kIdle) {
      // As the kernel: listening on an unbound id binds it to any address.
      sockaddr_in any{};
      any.sin_family = AF_INET;
      if (bind_id(id, reinterpret_cast<sockaddr*>(&any)) != 0) return -1;
    }
    if (id->state != IdState::kAddrBound) return fail(EINVAL);
    (void)backlog;  // unix sockets queue up to kListenBacklog; the kernel CM has no hard limit
    // An ephemeral port, or one bound without holding the name
    // (SO_REUSEADDR): the listener claims the name now.
    if (id->sock < 0 && claim_port_name(id) != 0) return -1;
    if (listen(id->sock, kListenBacklog) != 0) {
      socklen_t len;
      sockaddr_un un = unix_name(bound_name(id, &id->pub.route.addr.src_addr), &len);
      if (bind(id->sock, reinterpret_cast<sockaddr*>(&un), len) != 0) return -1;
      if (listen(id->sock, kListenBacklog) != 0) return -1;
    }
    id->sock_watch = watch_add(channel_of(id->pub.channel), WatchKind::kListener, id->sock, id);
    if (!id->sock_watch) return -1;
    if (net_listen(id) != 0) return -1;  // other hosts' REQs
    set_state(id, IdState::kListening, "rdma_listen");
    return 0;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_get_request(struct rdma_cm_id* listen_id,
                                                        struct rdma_cm_id** out) {
  if (!listen_id || !out) return fail(EINVAL);
  return guarded(-1, [&] {
    Id* listener = id_of(listen_id);
    if (!listener->sync) return fail(EINVAL);
    if (listen_id->event) {
      rdma_ack_cm_event(listen_id->event);
      listen_id->event = nullptr;
    }
    Event* ev = nullptr;
    if (next_event(channel_of(listen_id->channel), &ev) != 0) return -1;
    int rc = 0;
    if (ev->pub.event == RDMA_CM_EVENT_REJECTED) rc = fail(ECONNREFUSED);
    else if (ev->pub.status) rc = fail(ev->pub.status < 0 ? -ev->pub.status : ev->pub.status);
    else if (ev->pub.event != RDMA_CM_EVENT_CONNECT_REQUEST) rc = fail(EINVAL);
    if (rc == 0 && listener->listen_qp_attr) {
      ibv_qp_init_attr attr = *listener->listen_qp_attr;
      rc = rdma_create_qp(ev->pub.id, listen_id->pd, &attr);
    }
    if (rc != 0) {
      listen_id->event = &ev->pub;
      return -1;
    }
    *out = ev->pub.id;
    (*out)->event = &ev->pub;
    return 0;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_connect(struct rdma_cm_id* cm_id,
                                                    struct rdma_conn_param* param) {
  if (!cm_id) return fail(EINVAL);
  if (int e = call_fault(sv::faults::Call::kRdmaConnect)) return fail(e);  // (SOFTVERBS_FAULTS)
  return guarded(-1, [&] {
    CmLock lock(cm_mutex());
    Id* id = id_of(cm_id);
    if (id->state != IdState::kRouteResolved) return fail(EINVAL);
    if (!valid_param(id, param)) return fail(EINVAL);
    const uint8_t user_len = param && param->private_data ? param->private_data_len : 0;
    const size_t total = id->connect_data.size() + user_len;
    if (total > (is_ud(id) ? kSidrReqPrivateData : kReqPrivateData)) return fail(EINVAL);

    Device* dev = id->device;
    id->initiator_depth = param && param->initiator_depth != kMaxDepth ? param->initiator_depth
                                                                     : dev->max_initiator_depth;
    id->responder_resources = param && param->responder_resources != kMaxDepth
                                  ? param->responder_resources
                                  : dev->max_responder_resources;
    // 3-bit fields of the REQ: the kernel's rdma_cm takes min(7, value),
    // so 15 (libfabric's verbs provider asks for it) means 7.
    id->retry_count = param ? std::min<uint8_t>(param->retry_count, 7) : 7;
    id->rnr_retry_count = param ? std::min<uint8_t>(param->rnr_retry_count, 7) : 7;
    id->psn = random_psn();

    WireMessage msg = message_from(id, is_ud(id) ? MessageType::kSidrReq : MessageType::kReq);
    msg.qp_num = id->pub.qp ? id->pub.qp->qp_num : (param ? param->qp_num : 0);
    msg.srq = id->pub.qp ? id->pub.qp->srq != nullptr : (param ? param->srq : 0);
    msg.responder_resources = id->responder_resources;
    msg.initiator_depth = id->initiator_depth;
    msg.flow_control = param ? param->flow_control : 0;
    msg.retry_count = id->retry_count;
    msg.rnr_retry_count = id->rnr_retry_count;
    if (!id->connect_data.empty())
      std::memcpy(msg.private_data, id->connect_data.data(), id->connect_data.size());
    if (user_len) std::memcpy(msg.private_data + id->connect_data.size(), param->private_data, user_len);
    msg.private_data_len = static_cast<uint8_t>(total);
    id->connect_data.clear();

    set_state(id, IdState::kConnectSent, "rdma_connect");
    id->waiting_req = msg;
    // Another host, or with a host service another user of this one (no
    // listener of ours has the port): the REQ goes to its QP1
    // (cm_network.cpp), through the service.
    if (is_remote(id)) send_to_qp1(id);
    else if (link_connect(id) != 0) connect_refused(id);
    else if (send_message(id, msg) != 0) reject_unanswered(id);
    lock.unlock();
    return complete_sync(id);
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_accept(struct rdma_cm_id* cm_id,
                                                   struct rdma_conn_param* param) {
  if (!cm_id) return fail(EINVAL);
  if (int e = call_fault(sv::faults::Call::kRdmaAccept)) return fail(e);  // (SOFTVERBS_FAULTS)
  return guarded(-1, [&] {
    CmLock lock(cm_mutex());
    Id* id = id_of(cm_id);
    if (id->state == IdState::kFailed) return fail(ECONNRESET);  // the peer left
    if (id->state != IdState::kRequestReceived) return fail(EINVAL);
    if (!valid_param(id, param)) return fail(EINVAL);
    if (!id->pub.qp && !param && !is_ud(id)) return fail(EINVAL);
    const uint8_t user_len = param && param->private_data ? param->private_data_len : 0;
    if (user_len > (is_ud(id) ? kSidrRepPrivateData : kRepPrivateData)) return fail(EINVAL);

    Device* dev = id->device;
    if (!param || param->initiator_depth == kMaxDepth)
      id->initiator_depth = std::min(id->initiator_depth, dev->max_initiator_depth);
    else
      id->initiator_depth = param->initiator_depth;
    if (!param || param->responder_resources == kMaxDepth)
      id->responder_resources = std::min(id->responder_resources, dev->max_responder_resources);
    else
      id->responder_resources = param->responder_resources;

    if (!is_ud(id)) {
      if (move_qp_to_rtr(id) != 0 || move_qp_to_rts(id) != 0) return -1;
    }
    WireMessage msg = message_from(id, is_ud(id) ? MessageType::kSidrRep : MessageType::kRep);
    msg.qp_num = id->pub.qp ? id->pub.qp->qp_num : (param ? param->qp_num : 0);
    msg.srq = id->pub.qp ? id->pub.qp->srq != nullptr : (param ? param->srq : 0);
    msg.responder_resources = id->responder_resources;
    msg.initiator_depth = id->initiator_depth;
    msg.flow_control = param ? param->flow_control : 0;
    msg.rnr_retry_count = param ? std::min<uint8_t>(param->rnr_retry_count, 7) : 7;
    if (param) set_private_data(msg, param->private_data, user_len);
    if (send_message(id, msg) != 0) {
      move_qp_to_error(id);
      set_state(id, IdState::kFailed, "rdma_accept cannot send its REP");
      return fail(ECONNRESET);
    }
    if (is_ud(id)) {
      stop_watching(id);
      set_state(id, IdState::kEstablished, "rdma_accept; SIDR REP sent");
      if (id->sync && id->pub.event) {
        lock.unlock();
        rdma_ack_cm_event(id->pub.event);
        id->pub.event = nullptr;
      }
      return 0;
    }
    set_state(id, IdState::kAccepted, "rdma_accept; REP sent");
    lock.unlock();
    return complete_sync(id);
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_reject(struct rdma_cm_id* cm_id,
                                                   const void* private_data,
                                                   uint8_t private_data_len) {
  if (!cm_id) return fail(EINVAL);
  return guarded(-1, [&] {
    CmLock lock(cm_mutex());
    return do_reject(id_of(cm_id), private_data, private_data_len, kRejConsumerDefined);
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_reject_ece(struct rdma_cm_id* cm_id,
                                                       const void* private_data,
                                                       uint8_t private_data_len) {
  if (!cm_id) return fail(EINVAL);
  return guarded(-1, [&] {
    CmLock lock(cm_mutex());
    return do_reject(id_of(cm_id), private_data, private_data_len, kRejVendorOptionNotSupported);
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_establish(struct rdma_cm_id* cm_id) {
  if (!cm_id) return fail(EINVAL);
  return guarded(-1, [&] {
    CmLock lock(cm_mutex());
    Id* id = id_of(cm_id);
    // With a QP, the library established the connection itself.
    if (cm_id->qp || id->state != IdState::kResponseReceived) return fail(EINVAL);
    if (send_message(id, message_from(id, MessageType::kRtu)) != 0) return fail(ECONNRESET);
    set_state(id, IdState::kEstablished, "rdma_establish; RTU sent");
    return 0;
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_disconnect(struct rdma_cm_id* cm_id) {
  if (!cm_id) return fail(EINVAL);
  return guarded(-1, [&] {
    CmLock lock(cm_mutex());
    Id* id = id_of(cm_id);
    switch (id->state) {
      case IdState::kEstablished:
      case IdState::kAccepted:
      case IdState::kResponseReceived:
        break;
      case IdState::kDisconnected:
        // The peer disconnected first; answering is all that is left.
        if (move_qp_to_error(id) != 0) return -1;
        return 0;
      default:
        return fail(EINVAL);
    }
    if (move_qp_to_error(id) != 0) return -1;  // flushes what is outstanding
    send_message(id, message_from(id, MessageType::kDreq));
    stop_watching(id);
    set_state(id, IdState::kDisconnected, "rdma_disconnect");
    // The kernel reports DISCONNECTED once the peer's CM answers; a peer
    // that stopped pumping its events must not stall us, so report it now.
    queue_event(id, RDMA_CM_EVENT_DISCONNECTED, 0);
    lock.unlock();
    return complete_sync(id);
  });
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_notify(struct rdma_cm_id* cm_id,
                                                   enum ibv_event_type event) {
  if (!cm_id) return fail(EINVAL);
  CmLock lock(cm_mutex());
  Id* id = id_of(cm_id);
  if (event != IBV_EVENT_COMM_EST) return fail(EINVAL);
  // Data arrived before the RTU: the connection is established.
  if (id->state == IdState::kEstablished) return fail(EISCONN);
  if (id->state != IdState::kAccepted) return fail(EINVAL);
  set_state(id, IdState::kEstablished, "rdma_notify: data before the RTU");
  queue_event(id, RDMA_CM_EVENT_ESTABLISHED, 0);
  return 0;
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_set_local_ece(struct rdma_cm_id* cm_id,
                                                          struct ibv_ece* ece) {
  if (!cm_id || !ece || !ece->vendor_id) return fail(EINVAL);
  CmLock lock(cm_mutex());
  id_of(cm_id)->local_ece = *ece;
  return 0;
}

extern "C" SOFTVERBS_RDMACM_EXPORT int rdma_get_remote_ece(struct rdma_cm_id* cm_id,
                                                           struct ibv_ece* ece) {
  if (!cm_id || !ece) return fail(EINVAL);
  CmLock lock(cm_mutex());
  *ece = id_of(cm_id)->remote_ece;
  return 0;
}
