// The connection state machine's receive side: what an id does with each
// rendezvous message (REQ, REP, RTU, REJ, DREQ, SIDR REQ/REP), with a
// listener's new connections, and with a peer that vanishes. Runs under
// the CM lock, in whichever thread pumps the channel.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "cm_address.h"
#include "cm_link.h"
#include "cm_device.h"
#include "cm_network.h"
#include "cm_protocol.h"
#include "cm_qp.h"
#include "cm_state.h"
#include "util/peer_credentials.h"

namespace sv::rdmacm {
namespace {

void copy_private_data(Event* ev, const WireMessage& msg, uint8_t area) {
  std::memcpy(ev->private_data, msg.private_data, std::min<unsigned>(msg.private_data_len, area));
  ev->pub.param.conn.private_data = ev->private_data;
  ev->pub.param.conn.private_data_len = area;  // the whole CM area, as the kernel
}

void fill_conn_param(Event* ev, const WireMessage& msg) {
  auto& conn = ev->pub.param.conn;
  conn.responder_resources = msg.responder_resources;
  conn.initiator_depth = msg.initiator_depth;
  conn.flow_control = msg.flow_control;
  conn.retry_count = msg.retry_count;
  conn.rnr_retry_count = msg.rnr_retry_count;
  conn.srq = msg.srq;
  conn.qp_num = msg.qp_num;
}

void learn_peer(Id* id, const WireMessage& msg) {
  id->remote_qpn = msg.qp_num;
  id->remote_psn = msg.psn;
  id->remote_qkey = msg.qkey;
  id->remote_gid = msg.sender_gid;
  id->remote_ece = {msg.ece_vendor_id, msg.ece_options, 0};
  if (msg.path_mtu) id->path_mtu = std::min<uint8_t>(id->path_mtu, msg.path_mtu);
  id->connected_info = true;
}

ibv_ah_attr ah_to_peer(const Id* id) {
  ibv_ah_attr ah{};
  ah.is_global = 1;
  ah.grh.dgid = id->remote_gid;
  ah.grh.sgid_index = static_cast<uint8_t>(id->gid_index);
  ah.grh.hop_limit = 64;
  ah.grh.traffic_class = id->tos;
  ah.port_num = id->pub.port_num ? id->pub.port_num : 1;
  return ah;
}

}  // namespace

// A new connection's first message: the child id and CONNECT_REQUEST.
Id* on_request(Id* listener, Rendezvous* via, const WireMessage& msg) {
  const bool ud = msg.type == MessageType::kSidrReq;
  Channel* listen_channel = channel_of(listener->pub.channel);
  Id* child = id_create(listen_channel, listener->pub.context, listener->pub.ps,
                        listener->pub.qp_type, false);
  if (!child) return nullptr;  // (the peer's REQ is answered by its retries or its timeout)
  std::memcpy(&child->pub.route.addr.src_storage, &msg.receiver_addr, sizeof msg.receiver_addr);
  std::memcpy(&child->pub.route.addr.dst_storage, &msg.sender_addr, sizeof msg.sender_addr);
  Device* device = nullptr;
  int gid_index = 0;
  if (!find_device(&child->pub.route.addr.src_addr, &device, &gid_index)) {
    device = listener->device ? listener->device : first_device();
    gid_index = listener->device ? listener->gid_index : 0;
  }
  if (device) {
    child->device = device;
    child->gid_index = gid_index;
    child->pub.verbs = device->context;
    child->pub.port_num = 1;
    child->pub.pd = default_pd(device);
    child->path_mtu = device->active_mtu;
    ibv_query_gid(device->context, 1, gid_index, &child->pub.route.addr.addr.ibaddr.sgid);
  }
  child->pub.route.addr.addr.ibaddr.dgid = msg.sender_gid;
  child->pub.route.addr.addr.ibaddr.pkey = 0xffff;
  child->tos = listener->tos;
  child->ack_timeout = listener->ack_timeout;
  learn_peer(child, msg);
  // Until accept says otherwise, offer what the peer asked for.
  child->responder_resources = msg.initiator_depth;
  child->initiator_depth = msg.responder_resources;
  child->retry_count = std::min<uint8_t>(msg.retry_count, 7);  // 3 bits on the wire
  child->rnr_retry_count = std::min<uint8_t>(msg.rnr_retry_count, 7);
  child->psn = random_psn();
  set_state(child, IdState::kRequestReceived, ud ? "SIDR REQ" : "REQ");
  fill_route(child);

  Event* ev = queue_event(child, RDMA_CM_EVENT_CONNECT_REQUEST, 0);
  ev->pub.listen_id = &listener->pub;
  if (ud) {
    std::memcpy(ev->private_data, msg.private_data, std::min<unsigned>(msg.private_data_len, kSidrReqPrivateData));
    ev->pub.param.ud.private_data = ev->private_data;
    ev->pub.param.ud.private_data_len = kSidrReqPrivateData;
    ev->pub.param.ud.qp_num = msg.qp_num;
    ev->pub.param.ud.qkey = msg.qkey;
    ev->pub.param.ud.ah_attr = ah_to_peer(child);
  } else {
    copy_private_data(ev, msg, kReqPrivateData);
    fill_conn_param(ev, msg);
    // The passive side sees the active side's offer from its own view.
    ev->pub.param.conn.responder_resources = msg.initiator_depth;
    ev->pub.param.conn.initiator_depth = msg.responder_resources;
  }
  // A synchronous listener's children are synchronous too, each on a
  // channel of its own (rdma-core migrates them); the request event itself
  // stays on the listener's channel for rdma_get_request.
  if (listener->sync) {
    if (Channel* own = channel_create()) {
      child->pub.channel = &own->pub;
      child->sync = true;
    }
  }
  if (via) link_join(child, via, msg.sender_ref);
  return child;
}

namespace {

void on_reply(Id* id, const WireMessage& msg) {
  learn_peer(id, msg);
  id->responder_resources = msg.initiator_depth;
  id->initiator_depth = msg.responder_resources;
  id->rnr_retry_count = std::min<uint8_t>(msg.rnr_retry_count, 7);
  if (!id->pub.qp) {
    set_state(id, IdState::kResponseReceived, "REP; no QP, so rdma_establish sends the RTU");
    Event* ev = queue_event(id, RDMA_CM_EVENT_CONNECT_RESPONSE, 0);
    copy_private_data(ev, msg, kRepPrivateData);
    fill_conn_param(ev, msg);
    return;
  }
  if (move_qp_to_rtr(id) != 0 || move_qp_to_rts(id) != 0) {
    const int err = errno;
    WireMessage rej = message_from(id, MessageType::kRej);
    rej.reason = kRejConsumerDefined;
    send_message(id, rej);
    set_state(id, IdState::kFailed, "REP, but the QP cannot move to RTR/RTS");
    id->connect_error = true;
    stop_watching(id);
    queue_event(id, RDMA_CM_EVENT_CONNECT_ERROR, -err);
    return;
  }
  send_message(id, message_from(id, MessageType::kRtu));
  set_state(id, IdState::kEstablished, "REP; RTU sent");
  Event* ev = queue_event(id, RDMA_CM_EVENT_ESTABLISHED, 0);
  copy_private_data(ev, msg, kRepPrivateData);
  fill_conn_param(ev, msg);
}

void on_sidr_reply(Id* id, const WireMessage& msg) {
  stop_watching(id);
  if (msg.reason != 0) {
    set_state(id, IdState::kFailed, "SIDR REP with a reject status");
    queue_event(id, RDMA_CM_EVENT_UNREACHABLE, msg.reason);
    return;
  }
  learn_peer(id, msg);
  set_state(id, IdState::kEstablished, "SIDR REP");
  Event* ev = queue_event(id, RDMA_CM_EVENT_ESTABLISHED, 0);
  std::memcpy(ev->private_data, msg.private_data, std::min<unsigned>(msg.private_data_len, kSidrRepPrivateData));
  ev->pub.param.ud.private_data = ev->private_data;
  ev->pub.param.ud.private_data_len = kSidrRepPrivateData;
  ev->pub.param.ud.ah_attr = ah_to_peer(id);
  ev->pub.param.ud.qp_num = msg.qp_num;
  ev->pub.param.ud.qkey = msg.qkey;
}

void on_reject(Id* id, const WireMessage& msg) {
  stop_watching(id);
  set_state(id, IdState::kFailed, "REJ");
  move_qp_to_error(id);  // as librdmacm does on REJECTED
  Event* ev = queue_event(id, RDMA_CM_EVENT_REJECTED, msg.reason);
  copy_private_data(ev, msg, kRejPrivateData);
}

void on_disconnect_request(Id* id) {
  stop_watching(id);
  set_state(id, IdState::kDisconnected, "DREQ");
  queue_event(id, RDMA_CM_EVENT_DISCONNECTED, 0);
}

}  // namespace

// The peer destroyed its id, or its process died (the kernel closed its
// end of the link).
void on_peer_gone(Id* id) {
  stop_watching(id);
  switch (id->state) {
    case IdState::kEstablished:
    case IdState::kResponseReceived:
      set_state(id, IdState::kDisconnected, "the peer is gone");
      queue_event(id, RDMA_CM_EVENT_DISCONNECTED, 0);
      break;
    case IdState::kAccepted:
      set_state(id, IdState::kFailed, "the peer is gone before its RTU");
      queue_event(id, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET);
      break;
    case IdState::kConnectSent:
      set_state(id, IdState::kFailed, "the peer is gone before its REP");
      queue_event(id, RDMA_CM_EVENT_UNREACHABLE, -ECONNRESET);
      break;
    case IdState::kRequestReceived:
      set_state(id, IdState::kFailed, "the peer is gone before rdma_accept");  // rdma_accept will report it
      break;
    default:
      break;
  }
}

void handle(Id* id, const WireMessage& msg) {
  switch (msg.type) {
    case MessageType::kRep:
      if (id->state == IdState::kConnectSent) on_reply(id, msg);
      break;
    case MessageType::kSidrRep:
      if (id->state == IdState::kConnectSent) on_sidr_reply(id, msg);
      break;
    case MessageType::kRtu:
      if (id->state == IdState::kAccepted) {
        set_state(id, IdState::kEstablished, "RTU");
        Event* ev = queue_event(id, RDMA_CM_EVENT_ESTABLISHED, 0);
        copy_private_data(ev, msg, 0);
        ev->pub.param.conn.private_data = nullptr;
      }
      break;
    case MessageType::kRej:
      if (id->state == IdState::kConnectSent || id->state == IdState::kAccepted) on_reject(id, msg);
      break;
    case MessageType::kDreq:
      if (id->state == IdState::kEstablished || id->state == IdState::kAccepted ||
          id->state == IdState::kResponseReceived)
        on_disconnect_request(id);
      break;
    default:
      break;
  }
}


uint32_t random_psn() {
  static std::mt19937 rng{std::random_device{}()};
  return rng() & 0xffffff;
}

WireMessage message_from(const Id* id, MessageType type) {
  WireMessage msg;
  msg.type = type;
  msg.qp_type = static_cast<uint8_t>(id->pub.qp_type);
  msg.sender_gid = id->pub.route.addr.addr.ibaddr.sgid;
  msg.sender_addr = id->pub.route.addr.src_storage;
  msg.receiver_addr = id->pub.route.addr.dst_storage;
  msg.path_mtu = id->path_mtu;
  msg.psn = id->psn;
  msg.qkey = id->qkey;
  msg.ece_vendor_id = id->local_ece.vendor_id;
  msg.ece_options = id->local_ece.options;
  return msg;
}

void set_private_data(WireMessage& msg, const void* data, uint8_t len) {
  if (data && len) std::memcpy(msg.private_data, data, len);
  msg.private_data_len = data ? len : 0;
}

int send_message(Id* id, const WireMessage& msg) {
  if (id->net.active) return net_send(id, msg);
  return link_send(id, msg);
}

void stop_watching(Id* id) { link_leave(id); }

void fill_route(Id* id) {
  ibv_sa_path_rec* path = id->pub.route.path_rec;
  if (!path) {
    path = static_cast<ibv_sa_path_rec*>(std::calloc(1, sizeof *path));
    if (!path) return;
    id->pub.route.path_rec = path;
  }
  *path = {};
  path->dgid = id->pub.route.addr.addr.ibaddr.dgid;
  path->sgid = id->pub.route.addr.addr.ibaddr.sgid;
  path->hop_limit = 64;
  path->traffic_class = id->tos;
  path->reversible = 1;
  path->numb_path = 1;
  path->pkey = 0xffff;
  path->mtu_selector = 2;
  path->mtu = static_cast<ibv_mtu>(id->path_mtu);
  path->rate_selector = 2;
  path->rate = IBV_RATE_100_GBPS;
  path->packet_life_time_selector = 2;
  path->packet_life_time = 16;
  id->pub.route.num_paths = 1;
}

void on_listener_readable(Id* listener) { link_accept(listener); }

}  // namespace sv::rdmacm
