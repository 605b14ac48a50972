// Field by field, the rendezvous message and the IB CM message agree
// (IBTA vol 1 ch. 12; what Linux's cm.c and cma.c put in them over RoCE).
#include "cm_mad.h"

#include <cstring>

#include "cm_address.h"
#include "ibcm/cma_header.h"

namespace sv::rdmacm {
namespace {

using namespace ibcm;

// Linux rdma_cm's CMA_CM_RESPONSE_TIMEOUT and CMA_MAX_CM_RETRIES.
constexpr uint8_t kCmResponseTimeout = 20;
constexpr uint8_t kMaxCmRetries = 15;

Gid gid_of(const ibv_gid& g) {
  Gid out;
  std::memcpy(out.data(), g.raw, 16);
  return out;
}

TransportService service_of(ibv_qp_type t) {
  switch (t) {
    case IBV_QPT_UC: return TransportService::kUc;
    case IBV_QPT_XRC_SEND:
    case IBV_QPT_XRC_RECV: return TransportService::kExtended;
    default: return TransportService::kRc;
  }
}

uint64_t service_id_of(const Id* id) {
  const sockaddr* dst = &id->pub.route.addr.dst_addr;
  return ip_service_id(static_cast<PortSpace>(id->pub.ps), address_port(dst));
}

// The rdma_cm header (addresses, source port) and then the user's bytes.
template <size_t N>
void fill_cma_private_data(const Id* id, const WireMessage& msg, std::array<uint8_t, N>& area) {
  sockaddr_storage src = normalized(&id->pub.route.addr.src_addr);
  sockaddr_storage dst = normalized(&id->pub.route.addr.dst_addr);
  if (src.ss_family != dst.ss_family) {  // a dual-stack id: both as IPv6
    src = id->pub.route.addr.src_storage;
    dst = id->pub.route.addr.dst_storage;
  }
  if (auto h = cma_header_from(reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst)))
    encode_cma_header(*h, std::span<uint8_t, kCmaHeaderSize>(area.data(), kCmaHeaderSize));
  std::memcpy(area.data() + kCmaHeaderSize, msg.private_data,
              std::min<size_t>(msg.private_data_len, N - kCmaHeaderSize));
}

template <size_t N>
void fill_private_data(const WireMessage& msg, std::array<uint8_t, N>& area) {
  std::memcpy(area.data(), msg.private_data, std::min<size_t>(msg.private_data_len, N));
}

template <size_t N>
void take_private_data(const std::array<uint8_t, N>& area, size_t from, WireMessage& msg) {
  const size_t n = std::min<size_t>(N - from, kMaxPrivateData);
  std::memcpy(msg.private_data, area.data() + from, n);
  msg.private_data_len = static_cast<uint8_t>(n);
}

// The sender's and receiver's socket addresses from a REQ's rdma_cm header.
bool take_addresses(const std::array<uint8_t, kCmaHeaderSize>& header, uint64_t service_id, WireMessage& msg) {
  auto h = decode_cma_header(header);
  auto service = parse_ip_service_id(service_id);
  if (!h || !service) return false;
  to_sockaddrs(*h, service->port, msg.sender_addr, msg.receiver_addr);
  return true;
}

CmPath path_of(const Id* id) {
  CmPath p;
  p.local_port_lid = p.remote_port_lid = 0xffff;  // permissive: RoCE routes by GID (Linux cm_format_req)
  p.local_port_gid = gid_of(id->pub.route.addr.addr.ibaddr.sgid);
  p.remote_port_gid = gid_of(id->pub.route.addr.addr.ibaddr.dgid);
  p.packet_rate = IBV_RATE_100_GBPS;
  p.traffic_class = id->tos;
  p.hop_limit = 64;
  p.local_ack_timeout = id->ack_timeout;
  return p;
}

}  // namespace

std::optional<CmMessage> mad_from(const Id* id, const WireMessage& msg) {
  const NetLink& net = id->net;
  CmMessage out;
  out.transaction_id = net.transaction_id;
  switch (msg.type) {
    case MessageType::kReq: {
      Req r;
      r.local_comm_id = net.local_comm_id;
      r.service_id = service_id_of(id);
      r.local_ca_guid = net.local_guid;
      r.local_qpn = msg.qp_num;
      r.responder_resources = msg.responder_resources;
      r.initiator_depth = msg.initiator_depth;
      r.remote_cm_response_timeout = r.local_cm_response_timeout = kCmResponseTimeout;
      r.transport_service = service_of(static_cast<ibv_qp_type>(msg.qp_type));
      if (r.transport_service == TransportService::kExtended) r.extended_transport_type = kExtendedTransportXrc;
      r.end_to_end_flow_control = msg.flow_control;
      r.starting_psn = msg.psn;
      r.retry_count = msg.retry_count;
      r.rnr_retry_count = msg.rnr_retry_count;
      r.path_mtu = msg.path_mtu;
      r.max_cm_retries = kMaxCmRetries;
      r.srq = msg.srq;
      r.primary = path_of(id);
      fill_cma_private_data(id, msg, r.private_data);
      out.body = r;
      break;
    }
    case MessageType::kRep: {
      Rep r;
      r.local_comm_id = net.local_comm_id;
      r.remote_comm_id = net.remote_comm_id;
      r.local_qpn = msg.qp_num;
      r.starting_psn = msg.psn;
      r.responder_resources = msg.responder_resources;
      r.initiator_depth = msg.initiator_depth;
      r.end_to_end_flow_control = msg.flow_control;
      r.rnr_retry_count = msg.rnr_retry_count;
      r.srq = msg.srq;
      r.local_ca_guid = net.local_guid;
      fill_private_data(msg, r.private_data);
      out.body = r;
      break;
    }
    case MessageType::kRtu: {
      Rtu r;
      r.local_comm_id = net.local_comm_id;
      r.remote_comm_id = net.remote_comm_id;
      out.body = r;
      break;
    }
    case MessageType::kRej: {
      Rej r;
      r.local_comm_id = net.local_comm_id;
      r.remote_comm_id = net.remote_comm_id;
      r.message_rejected = id->state == IdState::kConnectSent ? MessageResponded::kRep : MessageResponded::kReq;
      r.reason = msg.reason;
      fill_private_data(msg, r.private_data);
      out.body = r;
      break;
    }
    case MessageType::kDreq: {
      Dreq r;
      r.local_comm_id = net.local_comm_id;
      r.remote_comm_id = net.remote_comm_id;
      r.remote_qpn_eecn = id->remote_qpn;
      out.body = r;
      break;
    }
    case MessageType::kSidrReq: {
      SidrReq r;
      r.request_id = net.local_comm_id;
      r.service_id = service_id_of(id);
      fill_cma_private_data(id, msg, r.private_data);
      out.body = r;
      break;
    }
    case MessageType::kSidrRep: {
      SidrRep r;
      r.request_id = net.remote_comm_id;
      r.status = static_cast<uint8_t>(msg.reason);
      r.qpn = msg.qp_num;
      r.service_id = net.service_id;
      r.qkey = msg.qkey;
      fill_private_data(msg, r.private_data);
      out.body = r;
      break;
    }
    default:
      return std::nullopt;
  }
  return out;
}

std::optional<WireMessage> message_from_mad(const CmMessage& mad, const MailboxHeader& from) {
  WireMessage msg;
  std::memcpy(msg.sender_gid.raw, from.src_ip, 16);  // what RoCE calls the sender: its IP
  if (const auto* r = std::get_if<Req>(&mad.body)) {
    msg.type = MessageType::kReq;
    switch (r->transport_service) {
      case TransportService::kRc: msg.qp_type = IBV_QPT_RC; break;
      case TransportService::kUc: msg.qp_type = IBV_QPT_UC; break;
      case TransportService::kExtended:
        if (r->extended_transport_type != kExtendedTransportXrc) return std::nullopt;
        msg.qp_type = IBV_QPT_XRC_SEND;
        break;
      default: return std::nullopt;
    }
    msg.qp_num = r->local_qpn;
    msg.psn = r->starting_psn;
    msg.responder_resources = r->responder_resources;
    msg.initiator_depth = r->initiator_depth;
    msg.flow_control = r->end_to_end_flow_control;
    msg.retry_count = r->retry_count;
    msg.rnr_retry_count = r->rnr_retry_count;
    msg.srq = r->srq;
    msg.path_mtu = r->path_mtu;
    std::array<uint8_t, kCmaHeaderSize> header;
    std::memcpy(header.data(), r->private_data.data(), kCmaHeaderSize);
    if (!take_addresses(header, r->service_id, msg)) return std::nullopt;
    take_private_data(r->private_data, kCmaHeaderSize, msg);
  } else if (const auto* s = std::get_if<SidrReq>(&mad.body)) {
    msg.type = MessageType::kSidrReq;
    msg.qp_type = IBV_QPT_UD;
    std::array<uint8_t, kCmaHeaderSize> header;
    std::memcpy(header.data(), s->private_data.data(), kCmaHeaderSize);
    if (!take_addresses(header, s->service_id, msg)) return std::nullopt;
    take_private_data(s->private_data, kCmaHeaderSize, msg);
  } else if (const auto* p = std::get_if<Rep>(&mad.body)) {
    msg.type = MessageType::kRep;
    msg.qp_num = p->local_qpn;
    msg.psn = p->starting_psn;
    msg.qkey = p->local_qkey;
    msg.responder_resources = p->responder_resources;
    msg.initiator_depth = p->initiator_depth;
    msg.flow_control = p->end_to_end_flow_control;
    msg.rnr_retry_count = p->rnr_retry_count;
    msg.srq = p->srq;
    take_private_data(p->private_data, 0, msg);
  } else if (std::get_if<Rtu>(&mad.body)) {
    msg.type = MessageType::kRtu;
  } else if (const auto* j = std::get_if<Rej>(&mad.body)) {
    msg.type = MessageType::kRej;
    msg.reason = j->reason;
    take_private_data(j->private_data, 0, msg);
  } else if (std::get_if<Dreq>(&mad.body)) {
    msg.type = MessageType::kDreq;
  } else if (const auto* q = std::get_if<SidrRep>(&mad.body)) {
    msg.type = MessageType::kSidrRep;
    msg.reason = q->status;
    msg.qp_num = q->qpn;
    msg.qkey = q->qkey;
    take_private_data(q->private_data, 0, msg);
  } else {
    return std::nullopt;
  }
  return msg;
}

}  // namespace sv::rdmacm
