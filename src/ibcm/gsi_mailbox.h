// How a CM MAD that reached this host finds the process it is for.
//
// Between hosts, connection management travels as CM MADs in UD packets to
// QP1 (the GSI). The kernel's CM answers QP1 for the whole host; softverbs
// has no kernel part, so whichever process receives a QP1 packet on UDP 4791
// (the network transport's port group) posts the MAD to a *mailbox*: a unix
// datagram socket held by the connection manager of the process it is for:
//
//   softverbs-<domain>-gsi-<ps>-<address>:<port>   a listener (REQ, SIDR REQ),
//                                                  named as the rendezvous
//                                                  names it (cm_address.h)
//   softverbs-<domain>-gsi-id-<4 hex>              a process's CM ids (every
//                                                  other message names the
//                                                  local communication ID of
//                                                  its receiver, whose top
//                                                  16 bits are the 4 hex)
//
// A process binds one id mailbox for all its ids (a second when all the
// comm IDs of the first are in use), not one each: fds per id would cap
// a process at ~1000 connections under the default open-file limit. It
// demuxes what it reads by the full comm ID (rdmacm/cm_network.cpp).
//
// Each mailbox datagram is a MailboxHeader (where the packet came from)
// followed by the 256-byte MAD. The names above are turned into socket
// addresses by mailbox_address(): files in the user's runtime directory,
// or (a named, shared domain) abstract names, which belong to the network
// namespace and vanish with their process, as the rendezvous names do.
#pragma once

#include <sys/socket.h>
#include <sys/un.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "cm_messages.h"
#include "mad_header.h"

namespace sv::ibcm {

struct MailboxHeader {
  uint32_t magic = kMagic;
  uint8_t src_ip[16]{};  // IPv6, or IPv4 as ::ffff:a.b.c.d
  uint8_t dst_ip[16]{};
  uint8_t traffic_class = 0;
  uint8_t hop_limit = 0;
  uint16_t pkey = 0xffff;
  uint32_t src_qpn = 0;

  static constexpr uint32_t kMagic = 0x53564731;  // "SVG1"
};

inline constexpr size_t kMailboxDatagram = sizeof(MailboxHeader) + kMadSize;

// SOFTVERBS_DOMAIN, or uid<N>: who may share softverbs state.
std::string domain_name();

// "tcp", "udp", "ipoib", "ib" for rdma_cm's port spaces (RDMA_PS_*).
const char* port_space_name(uint16_t port_space);
// An address as names spell it: "10.0.0.1", "[fe80::1]" (IPv4-mapped IPv6
// addresses as IPv4).
std::string address_text(const sockaddr* addr);

// softverbs-<domain>-<kind>-<ps>-<address>:<port>; kind "cm" (rendezvous) or "gsi".
std::string service_name(const char* kind, uint16_t port_space, const std::string& address, uint16_t port);
// The names a connection to `dst` (port included) tries, most specific
// first: the address, its family's wildcard, the dual-stack wildcard "*".
std::vector<std::string> service_names(const char* kind, uint16_t port_space, const sockaddr* dst);

// The mailbox that holds local communication ID `comm_id`: named by its top
// 16 bits, softverbs-<domain>-gsi-id-<4 hex>.
std::string comm_id_mailbox(uint32_t comm_id);
// The local communication ID of the MAD's receiver (0 for a REQ or SIDR REQ,
// which go to a listener).
uint32_t receiver_comm_id(const CmMessage& msg);

// A mailbox's name without its "softverbs-<domain>-" prefix: the same for
// every user, as the host service (shm/host_service.h) keys CM mailboxes.
std::string mailbox_key(const std::string& name);

// The socket address of mailbox `name`. In the user's own domain: a file in
// its runtime directory (util/runtime_dir_rules.h), gsi-<netns>-<name>, which
// no other user can bind first (and so be handed the MADs meant for us) or
// send to; the network namespace is part of it, as abstract names belong
// to one. In a domain named on purpose (shared by whoever names it), or
// when the path would not fit, the abstract name itself.
sockaddr_un mailbox_address(const std::string& name, socklen_t* len);
// Where this network namespace's mailbox files are: the runtime directory
// and the file names' prefix ("gsi-<netns>-"). False when mailboxes are
// abstract names (nothing to clean up after a killed process).
bool mailbox_files(std::string* dir, std::string* prefix);

// The CM's answer when nobody here owns what the MAD names, as Linux's CM
// gives it: a REJ (invalid service ID) to a REQ, a SIDR REP (unsupported)
// to a SIDR REQ, a DREP to a DREQ; nothing to anything else.
std::optional<CmMessage> answer_for_nobody(const CmMessage& in);

// The mailboxes a CM MAD is for, in the order to try (a REQ or SIDR REQ:
// its listeners, from its service ID and rdma_cm header; any other message:
// the communication ID it names as its receiver's). Empty when the MAD is
// not a CM message or not an rdma_cm one.
std::vector<std::string> mailboxes_for(std::span<const uint8_t> mad);

}  // namespace sv::ibcm
