#include "gsi_mailbox.h"

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cstdio>
#include <cstring>

#include "cm_messages.h"
#include "cma_header.h"
#include "util/knobs.h"
#include "util/runtime_dir_rules.h"
#include "util/unix_socket_address.h"

namespace sv::ibcm {

std::string domain_name() { return sv::knobs().domain; }

const char* port_space_name(uint16_t port_space) {
  switch (static_cast<PortSpace>(port_space)) {
    case PortSpace::kTcp: return "tcp";
    case PortSpace::kUdp: return "udp";
    case PortSpace::kIpoib: return "ipoib";
    case PortSpace::kIb: return "ib";
  }
  return "ps";
}

std::string address_text(const sockaddr* addr) {
  char text[INET6_ADDRSTRLEN] = "";
  if (addr->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(addr)->sin_addr, text, sizeof text);
    return text;
  }
  const in6_addr& a6 = reinterpret_cast<const sockaddr_in6*>(addr)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&a6)) {
    inet_ntop(AF_INET, &a6.s6_addr[12], text, sizeof text);
    return text;
  }
  inet_ntop(AF_INET6, &a6, text, sizeof text);
  return std::string("[") + text + "]";
}

std::string service_name(const char* kind, uint16_t port_space, const std::string& address, uint16_t port) {
  return "softverbs-" + domain_name() + "-" + kind + "-" + port_space_name(port_space) + "-" + address + ":" +
         std::to_string(port);
}

std::vector<std::string> service_names(const char* kind, uint16_t port_space, const sockaddr* dst) {
  uint16_t port = 0;
  bool v4 = dst->sa_family == AF_INET;
  if (v4) {
    port = ntohs(reinterpret_cast<const sockaddr_in*>(dst)->sin_port);
  } else {
    const auto* sin6 = reinterpret_cast<const sockaddr_in6*>(dst);
    port = ntohs(sin6->sin6_port);
    v4 = IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr);
  }
  return {service_name(kind, port_space, address_text(dst), port),
          service_name(kind, port_space, v4 ? "0.0.0.0" : "[::]", port),
          service_name(kind, port_space, "*", port)};
}

std::string comm_id_mailbox(uint32_t comm_id) {
  char hex[5];
  std::snprintf(hex, sizeof hex, "%04x", comm_id >> 16);
  return "softverbs-" + domain_name() + "-gsi-id-" + hex;
}

uint32_t receiver_comm_id(const CmMessage& msg) {
  return std::visit(
      [](const auto& m) -> uint32_t {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, Req> || std::is_same_v<T, SidrReq>)
          return 0;
        else if constexpr (std::is_same_v<T, SidrRep>)
          return m.request_id;
        else
          return m.remote_comm_id;
      },
      msg.body);
}

std::string mailbox_key(const std::string& name) {
  const std::string prefix = "softverbs-" + domain_name() + "-";
  return name.compare(0, prefix.size(), prefix) == 0 ? name.substr(prefix.size()) : name;
}

namespace {

// (libibverbs made and checked the directory, and says why not.) Never
// destroyed: the network thread posts MADs while the process exits.
const std::string& runtime_dir() {
  static const std::string& dir = *new std::string(sv::choose_runtime_dir().dir);
  return dir;
}

const std::string& file_prefix() {
  static const std::string& prefix = *new std::string("gsi-" + std::to_string(sv::own_netns_inode()) + "-");
  return prefix;
}

}  // namespace

sockaddr_un mailbox_address(const std::string& name, socklen_t* len) {
  if (sv::knobs().domain_named) return sv::abstract_unix_address(name, len);
  return sv::user_unix_address(runtime_dir(), file_prefix() + name, name, len);
}

bool mailbox_files(std::string* dir, std::string* prefix) {
  if (sv::knobs().domain_named || runtime_dir().empty()) return false;
  *dir = runtime_dir();
  *prefix = file_prefix();
  return true;
}

namespace {

// A REQ's or SIDR REQ's listeners: the service ID gives the port space and
// port, the rdma_cm header at the start of the private data the address.
std::vector<std::string> listeners_for(uint64_t service_id, std::span<const uint8_t> private_data) {
  auto service = parse_ip_service_id(service_id);
  auto header = decode_cma_header(private_data);
  if (!service || !header) return {};
  sockaddr_storage src, dst;
  to_sockaddrs(*header, service->port, src, dst);
  return service_names("gsi", static_cast<uint16_t>(service->port_space), reinterpret_cast<sockaddr*>(&dst));
}

}  // namespace

std::optional<CmMessage> answer_for_nobody(const CmMessage& in) {
  CmMessage out;
  out.transaction_id = in.transaction_id;
  if (const auto* req = std::get_if<Req>(&in.body)) {
    Rej rej;
    rej.remote_comm_id = req->local_comm_id;
    rej.message_rejected = MessageResponded::kReq;
    rej.reason = static_cast<uint16_t>(RejReason::kInvalidServiceId);
    out.body = rej;
  } else if (const auto* sidr = std::get_if<SidrReq>(&in.body)) {
    SidrRep rep;
    rep.request_id = sidr->request_id;
    rep.service_id = sidr->service_id;
    rep.status = static_cast<uint8_t>(SidrStatus::kUnsupported);
    out.body = rep;
  } else if (const auto* dreq = std::get_if<Dreq>(&in.body)) {
    Drep drep;
    drep.local_comm_id = dreq->remote_comm_id;
    drep.remote_comm_id = dreq->local_comm_id;
    out.body = drep;
  } else {
    return std::nullopt;
  }
  return out;
}

std::vector<std::string> mailboxes_for(std::span<const uint8_t> mad) {
  CmMessage msg;
  if (decode(mad, msg) != DecodeError::kNone) return {};
  if (const auto* req = std::get_if<Req>(&msg.body)) return listeners_for(req->service_id, req->private_data);
  if (const auto* sidr = std::get_if<SidrReq>(&msg.body)) return listeners_for(sidr->service_id, sidr->private_data);
  return {comm_id_mailbox(receiver_comm_id(msg))};
}

}  // namespace sv::ibcm
