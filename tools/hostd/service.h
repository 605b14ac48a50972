// softverbs-hostd's service (docs/ARCHITECTURE.md, "Security"): one per
// network namespace, run by root. It owns UDP port 4791, leases registry
// slots host-wide over its abstract SOCK_SEQPACKET socket (a QPN then names
// one QP on the host), holds the CM mailbox claims, and hands each datagram
// to the process whose QP it is for (hostd/datagram_route.h). It is what a
// NIC is on a host shared by several users: nothing one user does to it
// may keep it from serving the others (hostd/connection_budget.h,
// hostd/claim_table.h), and a datagram it hands on is only ever said to come
// from a local process when it did (from_process).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "hostd/claim_table.h"
#include "hostd/connection_budget.h"
#include "kernel_steering.h"
#include "shm/layout.h"
#include "transport/roce_socket.h"
#include "util/host_service_socket.h"
#include "util/port_attestation.h"

namespace sv::hostd {

struct Counters {
  uint64_t forwarded = 0, no_owner = 0, owner_busy = 0, malformed = 0;
  uint64_t local_udp = 0;       // UDP from this host's addresses, from a port no process of ours sends from
  uint64_t forged_source = 0;   // a process's datagram naming a source it is not: another slot's QP, another host
  uint64_t refused = 0;         // connections over the budget (connection_budget.h)
};

class Service {
 public:
  struct Options {
    bool verbose = false;
    bool steer = true;           // have the kernel steer datagrams to processes when it can (kernel_steering.h)
    size_t max_connections = 0;  // 0: what the file limit leaves
    int port_wait_ms = 30'000;   // how long to wait for processes that hold the port to hand it over
    std::string state_dir = "/run/softverbs-hostd";  // where leases and claims outlive a restart ("": nowhere)
    ClaimTable::Limits claims;
  };
  explicit Service(Options o);
  ~Service();
  Service(const Service&) = delete;
  Service& operator=(const Service&) = delete;

  // Binds the port and the socket name. False (said why) when it cannot.
  bool open();
  // Whether the kernel steers datagrams to processes (else the service
  // hands each on).
  bool steering() const { return steer4_.attached(); }
  // Serves until `*stop` is set (by a signal).
  void run(volatile int* stop);
  const Counters& counters() const { return n_; }
  // Who holds which slot and CM key, for the next service (load_state).
  void save_state() const;

 private:
  struct Client {
    uint32_t uid = 0;
    pid_t pid = 0;
    uint32_t slot = 0;     // 0: no lease yet
    bool network = false;  // its network thread runs: it takes CM MADs and multicast
    // The sockets it sends from, held (their ports stay its own) and
    // vouched for in the attestation table: [0] IPv4, [1] IPv6.
    int attested[2] = {-1, -1};
    uint16_t attested_port[2] = {0, 0};
    uint32_t channels = 0;  // ring pairs to other slots (open_channel)
  };

  void watch(int fd);
  void accept_clients();
  void refuse(int fd, uint32_t uid, uint8_t reason);
  bool serve_client(int fd);  // false: nothing more to read from it now
  void drop_client(int fd);
  void lease(int fd, Client& c, const uint8_t* bytes, size_t n);
  bool send_sockets(int fd, uint32_t slot, bool members_too, bool steered);
  void attest(int fd, Client& c, const uint8_t* bytes, size_t n, int* fds, int count);
  bool vouch(Client& c, int* send4, int* send6, AttestReply* rep);
  void rejoin(int fd, Client& c, const uint8_t* bytes, size_t n, int* fds, int count);
  void forget_attested(Client& c);
  void linger_attested(Client& c);
  void end_lingering(uint64_t now_ns);
  int wait_ms() const;
  void open_channel(int fd, Client& c, const uint8_t* bytes, size_t n);
  bool send_channel(int fd, const Client& peer, int ring_out, int ring_in, int bell_out, int bell_in);
  void close_channels_of(const Client& c);
  void notify_closed(uint32_t to_slot, uint32_t closed_slot);
  void retry_closes();
  bool may_lease(uint32_t slot, const Client& c, uint32_t* holder) const;
  void take_lease(int fd, Client& c, uint32_t slot);
  bool in_our_namespace(int fd) const;
  void load_state();
  void claim(int fd, const Client& c, const uint8_t* bytes, size_t n, bool release);
  void network_up(int fd, Client& c);
  void receive_datagrams(int fd);
  void route(const uint8_t* data, size_t len, uint16_t seg, const DatagramInfo& info);
  void route_one(const uint8_t* data, size_t len, const DatagramInfo& info);
  bool send_to(int fd, const uint8_t* data, size_t len, uint16_t seg, const DatagramInfo& info);
  void route_mad(const uint8_t* data, size_t len, const DatagramInfo& info);
  int mad_reader_for(int claimant) const;
  int any_network_reader() const;
  void from_process(const Client& c, const uint8_t* bytes, size_t n);

  bool open_port();
  bool open_attestation_table();

  Options opt_;
  RoceSocket sock_;
  KernelSteering steer4_, steer6_;
  PortAttestationTable* table_ = nullptr;  // ours to write
  int table_ro_fd_ = -1;                   // what processes map
  int listener_ = -1;
  int epoll_ = -1;
  int spare_fd_ = -1;  // given up to accept (and refuse) a connection at the file limit
  std::unordered_map<int, Client> clients_;
  int by_slot_[shm::kHomeSlots];  // the client fd holding each slot's lease; -1: none
  ConnectionBudget budget_;
  ClaimTable claims_;
  // Connections whose process's network thread runs, by pid and by uid: CM
  // MADs go to the claimant's process, else to another of its user's.
  std::unordered_map<pid_t, int> network_by_pid_;
  std::unordered_map<uint32_t, std::unordered_set<int>> network_by_uid_;
  std::set<std::pair<uint32_t, uint32_t>> channel_pairs_;  // (lower slot, higher slot)
  struct PendingClose {
    uint32_t to_slot, closed_slot;
  };
  std::vector<PendingClose> pending_closes_;  // kChannelClosed notices a full queue refused
  // The ports of processes that left, still held and vouched for a while
  // (kPortLingerNs): their last datagrams may still wait in a receiver's
  // socket queue (the ACK of a ping-pong's last message, sent as its
  // process exits), and were sent by that process.
  struct Lingering {
    int fd;
    int family;
    uint16_t port;
    uint64_t until_ns;
  };
  std::vector<Lingering> lingering_;
  // Slots (and CM keys) a previous service had leased (its state file):
  // kept for their processes' return for a while (kRestartGraceNs).
  struct Reserved {
    uint32_t uid = 0;
    pid_t pid = 0;
    uint64_t until_ns = 0;
  };
  Reserved reserved_[shm::kHomeSlots];
  std::unordered_map<std::string, Reserved> reserved_claims_;
  uint64_t netns_cookie_ = 0;
  std::vector<uint8_t> inbox_;
  uint16_t stamp_ = 0;  // while routing a process's datagram: its leased slot
  Counters n_;
};

}  // namespace sv::hostd
