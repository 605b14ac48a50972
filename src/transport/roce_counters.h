// What the RoCEv2 engine counts, per process and per QP: packets and bytes
// each way, retransmissions, ACK timeouts, NAKs of each kind sent and
// received, duplicates, ICRC errors, packets for no QP. The counters live in
// a small shared file, net.<pid> in the user's runtime directory
// (shm/runtime_dir.h), that a command-line tool (softverbs-stat,
// tools/softverbs_stat.cpp) reads while the process runs, as `rdma
// statistic` reads a NIC's; the file goes away when the process exits.
// With SOFTVERBS_STAT_AT_EXIT=1 the same lines also go to stderr: a QP's as
// it is destroyed, the device's at exit (a run may end between samples).
#pragma once

#include <sys/types.h>

#include <cstdio>

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include "util/private_heap.h"

namespace sv::roce {

enum Counter : uint32_t {
  kPacketsSent,
  kPacketsReceived,
  kBytesSent,
  kBytesReceived,
  kRetransmits,       // go-back-N restarts (after a sequence NAK or a timeout)
  kAckTimeouts,
  kProbes,            // loss probes: the oldest unacknowledged packet again, after a quiet spell
  kSeqNaksSent,
  kSeqNaksReceived,
  kRnrNaksSent,
  kRnrNaksReceived,
  kErrorNaksSent,     // invalid request, remote access, remote operational
  kErrorNaksReceived,
  kDuplicates,        // requests that arrived again (answered from the past)
  kIcrcErrors,        // dropped: corrupted in flight
  kNoQp,              // dropped: for no QP of this host, or not from its peer
  kWrongTransport,    // dropped: an opcode of another transport than the QP's
  kStaleReads,        // dropped: a READ with a past PSN that is none of the last executed
  kForeignSenders,    // dropped: handed to us through a unix socket by another user's process
  kForwarded,         // packets for another process of this host, handed to it (roce_forward.h)
  kSteeredFlows,      // flows the kernel now brings straight to this process (roce_steering.h)
  // How a ping-pong runs (Engine::answers_held_ns): answer packets (ACK,
  // NAK, READ response, atomic ACK) that left in one send with requests
  // (a reply carrying the ACK of the message it answers), and those that
  // left alone (a second trip through the kernel);
  kAnswersCarried,
  kAnswersAlone,
  // and who received: an application thread polling its CQ
  // (RoceTransport::progress), or the network thread, woken by the packets
  // (a thread hand-off: most often the application was away from its CQ,
  // spinning on memory for a WRITE): the times one found the sockets
  // holding something.
  kAppReceives,
  kThreadReceives,
  // dropped: a datagram from an address of this host that no local process
  // the host service vouches for sent, or one the service vouched for that
  // claims a source that is not this host's (docs/ARCHITECTURE.md,
  // "Security": a local user never speaks for another host or process)
  kUnattested,
  // datagrams from other users' processes of this host that came through
  // the rings the host service made (roce_peer_channels.h)
  kRingDatagrams,
  // times an application thread armed the io_uring that tells it a socket
  // was woken (SOFTVERBS_IO_URING=1, receive_watch.h): a system call each
  kWatchArms,
  kCounterCount
};
const char* counter_name(uint32_t c);

struct CounterBlock {
  std::atomic<uint64_t> v[kCounterCount];
};

inline constexpr uint32_t kStatsMagic = 0x53565354;  // "SVST"
inline constexpr uint32_t kStatsVersion = 8;
inline constexpr uint32_t kStatsQps = 256;  // QPs counted one by one; the rest only in the device total

struct StatsQp {
  std::atomic<uint32_t> qpn;  // 0: free slot
  uint32_t reserved;
  CounterBlock c;
};

struct StatsFile : PrivateHeapObject {
  uint32_t magic;
  uint32_t version;
  uint32_t pid;
  uint32_t counters;  // kCounterCount when written
  CounterBlock device;
  StatsQp qps[kStatsQps];
};

// The counters file of our process `pid`; "" when we have no runtime directory.
std::string stats_path(pid_t pid);

// One line of softverbs-stat: "  <what> name value ..." (every counter with
// `all`, else those above 0). `count`: how many counters the block's writer knew.
void print_counters(FILE* out, const char* what, const CounterBlock& b, uint32_t count, bool all);

// The engine's side. Calls come under the engine's mu, except add_device
// (atomic; after open()).
class Counters {
 public:
  void open();           // creates this process's file (once the engine starts); gone at exit
  void open_in_memory();  // counts into private memory, for a test's engines (no file)
  // A device total, as a reader of the file sees it (0 before open).
  uint64_t device_total(Counter c) const {
    return file_ ? file_->device.v[c].load(std::memory_order_relaxed) : 0;
  }
  void drop_in_child();  // a fork()ed child forgets its parent's file
  void add(uint32_t qpn, Counter c, uint64_t n = 1);
  void add_device(Counter c, uint64_t n = 1);
  // Only QP `qpn`'s row, for what add_device counted already.
  void add_qp(uint32_t qpn, Counter c, uint64_t n = 1);
  void forget(uint32_t qpn);

 private:
  StatsQp* slot(uint32_t qpn);
  void trace_event(uint32_t qpn, Counter c);

  StatsFile* file_ = nullptr;
  std::string path_;
  PrivateUnorderedMap<uint32_t, StatsQp*> slots_;
  uint32_t last_qpn_ = 0;  // the last lookup, which the next one most often repeats
  StatsQp* last_slot_ = nullptr;
};

}  // namespace sv::roce
