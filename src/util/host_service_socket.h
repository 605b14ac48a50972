// The host service's socket (shm/host_service.h, tools/hostd): one abstract
// SOCK_SEQPACKET name per network namespace, which any user could bind
// first, and the messages that travel over it. Header-only: the service,
// libibverbs (slot leases, datagrams) and librdmacm (CM mailbox claims)
// all speak it.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "util/knobs.h"
#include "util/peer_credentials.h"
#include "util/unix_socket_address.h"

namespace sv {

inline constexpr char kHostServiceSocket[] = "softverbs-hostd";

// SOFTVERBS_HOSTD=off (or 0): never use the service.
inline bool host_service_wanted() { return knobs().use_host_service; }

// The uid the service runs as besides root (SOFTVERBS_HOSTD_UID).
inline uint32_t host_service_uid() { return knobs().host_service_uid; }

// A connection to the service of this network namespace, or -1: none
// runs, or SOFTVERBS_HOSTD=off, or the name's holder is not a uid we trust
// with our packets (root, our own, SOFTVERBS_HOSTD_UID), whose uid then
// goes to *untrusted (else UINT32_MAX).
inline int connect_host_service(uint32_t* untrusted) {
  *untrusted = UINT32_MAX;
  if (!host_service_wanted()) return -1;
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  socklen_t len;
  const sockaddr_un a = abstract_unix_address(kHostServiceSocket, &len);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
    close(fd);  // no service in this network namespace: the usual case
    return -1;
  }
  const uint32_t uid = peer_uid(fd);
  if (uid != 0 && uid != geteuid() && uid != host_service_uid()) {
    *untrusted = uid;
    close(fd);
    return -1;
  }
  return fd;
}

namespace hostd {

enum MessageType : uint8_t {
  kLease = 1,       // process -> service: may I have this slot?
  kLeaseReply = 2,  // service -> process
  kDatagram = 3,    // service -> process: a RoCEv2 datagram for one of its QPs
  kNetworkUp = 4,   // process -> service: its network thread runs (it reads CM MADs and multicast)
  kClaim = 5,       // CM -> service: the CM MADs for this mailbox key are for me
  kClaimReply = 6,  // service -> CM
  kRelease = 7,     // CM -> service: no longer (also when the connection closes)
  kSend = 8,        // process -> service: a RoCEv2 datagram for a QP of this host (DatagramHeader first)
};

// A message with nothing but its type.
struct Notice {
  uint8_t type = 0;
  uint8_t reserved[7] = {};
};

// A CM mailbox (ibcm/gsi_mailbox.h) as the service knows it: its name
// without the "softverbs-<domain>-" prefix, the same for every user
// ("gsi-tcp-10.0.0.1:7471", "gsi-id-0a1b2c3d"). The CM MADs a mailbox is
// for go only to the user whose process claimed its key: no other user
// sees a REQ's private data, and a second claim of a listener's key (the
// port taken by another user) fails as a second bind of a port does.
struct Claim {
  uint8_t type = kClaim;
  uint8_t reserved[3] = {};
  uint32_t length = 0;
  char key[120] = {};
};

struct ClaimReply {
  uint8_t type = kClaimReply;
  uint8_t granted = 0;
  uint8_t reserved[2] = {};
  uint32_t holder_uid = 0;
};

struct Lease {
  uint8_t type = kLease;
  uint8_t reserved[3] = {};
  uint32_t slot = 0;
};

struct LeaseReply {
  uint8_t type = kLeaseReply;
  uint8_t granted = 0;
  uint8_t reserved[2] = {};
  uint32_t slot = 0;
  uint32_t holder_uid = 0;  // when refused: whose it is
};

// Flags of a datagram the service hands on: kFromProcess, it came from a
// process of this host over its connection (kSend), and sender_slot is
// the slot the service leased to that process: the receiver takes it from
// its connected peer's slot only. Local processes reach each other this
// way only: the service drops UDP datagrams from this host's own
// addresses, which any local user could forge.
inline constexpr uint8_t kFromProcess = 1;

// Ahead of each datagram's bytes (from the UDP payload on, ICRC included:
// the receiving process checks it), both ways.
struct DatagramHeader {
  uint8_t type = kDatagram;
  uint8_t flags = 0;
  uint16_t seg = 0;  // 0: one datagram; else a GRO buffer's segment size (datagrams back to back)
  uint16_t src_port = 0, dst_port = 0;
  uint8_t traffic_class = 0, hop_limit = 64;
  uint16_t sender_slot = 0;  // kFromProcess: the sending process's leased slot
  uint8_t reserved[4] = {};
  in6_addr src{}, dst{};  // IPv4 as ::ffff:a.b.c.d
};
static_assert(sizeof(DatagramHeader) == 48);

}  // namespace hostd

}  // namespace sv
