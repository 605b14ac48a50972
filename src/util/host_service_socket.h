// The host service's socket (shm/host_service.h, tools/hostd): one abstract
// SOCK_SEQPACKET name per network namespace, which any user could bind
// first, and the messages that travel over it. Header-only: the service,
// libibverbs (slot leases, datagrams) and librdmacm (CM mailbox claims)
// all speak it.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
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

// How long a process waits for the service to take its connection (its
// backlog full: a flood, or many processes starting at once) before it
// gives up and says so.
inline constexpr int kHostServiceConnectMs = 5000;

// A connection to the service of this network namespace, or -1: none
// runs, or SOFTVERBS_HOSTD=off, or the name's holder is not a uid we trust
// with our packets (root, our own, SOFTVERBS_HOSTD_UID), whose uid then
// goes to *untrusted (else UINT32_MAX), or it did not take the connection
// in kHostServiceConnectMs (errno ETIMEDOUT). Never blocks for longer: a
// connect() to a listener whose backlog is full would wait for ever.
// `trusted_uid`: the uid besides root and ours whose service we take
// (SOFTVERBS_HOSTD_UID; a thread that runs on its own passes what it read
// when it started, as the knobs may change under a test).
inline int connect_host_service(uint32_t* untrusted, uint32_t trusted_uid) {
  *untrusted = UINT32_MAX;
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  socklen_t len;
  const sockaddr_un a = abstract_unix_address(kHostServiceSocket, &len);
  // (A unix socket's non-blocking connect either completes or fails with
  // EAGAIN while the backlog is full: try again until the deadline.)
  for (int waited_ms = 0;; waited_ms += 10) {
    if (connect(fd, reinterpret_cast<const sockaddr*>(&a), len) == 0) break;
    if (errno != EAGAIN || waited_ms >= kHostServiceConnectMs) {
      const int e = errno == EAGAIN ? ETIMEDOUT : errno;
      close(fd);  // (ECONNREFUSED, ENOENT: no service in this network namespace, the usual case)
      errno = e;
      return -1;
    }
    usleep(10'000);
  }
  const int flags = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  const uint32_t uid = peer_uid(fd);
  if (uid != 0 && uid != geteuid() && uid != trusted_uid) {
    *untrusted = uid;
    close(fd);
    return -1;
  }
  return fd;
}

inline int connect_host_service(uint32_t* untrusted) {
  if (!host_service_wanted()) {
    *untrusted = UINT32_MAX;
    return -1;
  }
  return connect_host_service(untrusted, host_service_uid());
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
  kRefused = 9,     // service -> process: the connection is not taken (Refusal), and closes
  kSockets = 10,    // service -> process, after a granted lease: Sockets, with descriptors
  kAttest = 11,     // process -> service: Attest, with the sockets it sends RoCEv2 from
  kAttestReply = 12,
  kRejoin = 13,     // process -> service: Rejoin, with the sockets it has (after a restart, or a handover)
  kChannel = 14,       // process -> service: ChannelRequest: rings to the process of another user's slot
  kChannelOpen = 15,   // service -> both processes: ChannelOpen, with the rings and bells
  kChannelClosed = 16,  // service -> process: ChannelOpen's peer is gone (peer_slot says which)
};

// Two processes of different users of one host exchange their datagrams
// through a pair of rings in shared memory the service makes
// (shm/peer_ring.h), not through the kernel's UDP stack. A process asks for
// them when it first sends to another user's process of this host (the
// datagrams go by UDP until they are there); the service checks that
// `slot` is leased to a process with a connection, and sends each of the
// two a ChannelOpen naming the other's slot (what comes from the ring in is
// from that slot: the service attests it, as a port in the attestation
// table), with four descriptors: the ring it writes, the ring it reads,
// the bell it rings when it put something the peer had emptied (an
// eventfd the peer's network thread watches), and the bell it watches.
// Each pair has its own two bells: a peer can steal no wake-up but its own.
struct ChannelRequest {
  uint8_t type = kChannel;
  uint8_t reserved[3] = {};
  uint32_t slot = 0;
};

struct ChannelOpen {
  uint8_t type = kChannelOpen;
  uint8_t reserved[3] = {};
  uint32_t peer_slot = 0;
  uint32_t peer_pid = 0;  // (to notice the peer's end while no service runs)
  uint32_t reserved2 = 0;
};

// After a granted lease, what the process receives with: descriptors for
// the port attestation table (util/port_attestation.h, read-only), then,
// when the kernel steers (tools/hostd/kernel_steering.h), its members of
// the service's UDP 4791 groups, IPv4 then IPv6 (`v4`, `v6` say which
// came). Not steered: the service hands the process its datagrams over
// this connection (kDatagram).
struct Sockets {
  uint8_t type = kSockets;
  uint8_t steered = 0;
  uint8_t v4 = 0, v6 = 0;
  uint8_t reserved[4] = {};
};

// The sockets a process sends RoCEv2 from (descriptors, IPv4 then IPv6,
// as `v4` and `v6` say): the service holds them, and vouches for their
// ports as the process's in the attestation table. Each must be a UDP
// socket of its own port (not 4791, no SO_REUSEADDR or SO_REUSEPORT).
struct Attest {
  uint8_t type = kAttest;
  uint8_t v4 = 0, v6 = 0;
  uint8_t reserved[5] = {};
};

// A process that was using a service (before it restarted), or that held
// the port itself until a service came: its slot, which it asks to lease
// again, and the sockets it has: its members of the port's groups, if any
// (IPv4, IPv6: the kernel goes on steering to them), then those it sends
// from (IPv4, IPv6), as flags say which. The service answers with a
// LeaseReply for `slot`; when granted, a Sockets message follows, with new
// members only when the process passed none and the kernel steers.
struct Rejoin {
  uint8_t type = kRejoin;
  uint8_t member4 = 0, member6 = 0, send4 = 0, send6 = 0;
  uint8_t reserved[3] = {};
  uint32_t slot = 0;
  uint32_t reserved2 = 0;
};

struct AttestReply {
  uint8_t type = kAttestReply;
  uint8_t granted = 0;  // every socket passed is now vouched for
  uint16_t port4 = 0, port6 = 0;
  uint8_t reserved[2] = {};
};

// Why the service refused a connection (connection_budget.h).
enum RefusalReason : uint8_t {
  kRefusedOverShare = 1,      // the uid holds its share of the service's connections
  kRefusedNoDescriptors = 2,  // the service is out of file descriptors
};

struct Refusal {
  uint8_t type = kRefused;
  uint8_t reason = 0;
  uint8_t reserved[2] = {};
  uint32_t uid = 0;    // whose connection
  uint32_t held = 0;   // how many that uid holds
  uint32_t share = 0;  // how many it may hold now
};

// A reply from the service, read whole: the reply expected, or a refusal
// (the larger of them) in its place.
struct ReplyBuffer {
  alignas(8) uint8_t bytes[sizeof(Refusal)] = {};
  template <typename T>
  T as() const {
    static_assert(sizeof(T) <= sizeof bytes);
    T t;
    std::memcpy(&t, bytes, sizeof t);
    return t;
  }
  // A refusal, received whole (`got` bytes).
  bool refused(ssize_t got) const { return got == static_cast<ssize_t>(sizeof(Refusal)) && bytes[0] == kRefused; }
};

// Receives a reply from the service into `m`: its length, 0 once the
// service closed the connection and nothing more waits, or -1 (errno). A
// service that refused us closed the connection right after saying so, and
// if our request was still unread there, the kernel reports ECONNRESET
// first (once): what it said is still queued behind that, and is read.
inline ssize_t receive_reply(int fd, ReplyBuffer* m, int flags = 0) {
  for (int resets = 0;;) {
    const ssize_t got = recv(fd, m->bytes, sizeof m->bytes, flags);
    if (got < 0 && (errno == EINTR || (errno == ECONNRESET && resets++ == 0))) continue;
    return got;
  }
}

// What a refusal says, for the process's error message.
inline const char* refusal_reason_str(uint8_t reason) {
  return reason == kRefusedOverShare       ? "this user holds its share of the service's connections"
         : reason == kRefusedNoDescriptors ? "the service is out of file descriptors"
                                           : "no reason given";
}

// A message with nothing but its type.
struct Notice {
  uint8_t type = 0;
  uint8_t reserved[7] = {};
};

// A CM mailbox (ibcm/gsi_mailbox.h) as the service knows it: its name
// without the "softverbs-<domain>-" prefix, the same for every user
// ("gsi-tcp-10.0.0.1:7471", "gsi-id-0a1b"). The CM MADs a mailbox is
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
