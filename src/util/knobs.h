// Every environment knob of softverbs, read once, in one struct.
// The README's knob table mirrors this file.
#pragma once

#include <cstdint>
#include <string>

namespace sv {

// How an initiator reaches memory registered by another process.
enum class MemPath {
  kAuto,  // overlay (shared mapping) where possible, else cross-memory attach
  kMap,   // only the overlay path; registrations that cannot be overlaid use CMA
  kCma,   // never overlay: always process_vm_readv/writev
  kBounce,  // never overlay, never process_vm_*: the owner's bounce service copies
};

struct Knobs {
  int log_level = 1;                 // SOFTVERBS_LOG: error|warn|info|debug|trace
  std::string domain;                // SOFTVERBS_DOMAIN: registry name (default uid<uid>)
  bool domain_named = false;         // SOFTVERBS_DOMAIN set, not empty: a domain named on purpose, shared by name
  // SOFTVERBS_DOMAIN in the environment at all, even empty. Only the registry
  // asks this (shm/registry.cpp): an empty value still puts its registry in
  // /dev/shm under the default name, as it always has.
  bool domain_in_environment = false;
  std::string runtime_dir;           // SOFTVERBS_RUNTIME_DIR: this user's state directory ("": util/runtime_dir_rules.h chooses)
  unsigned domain_mode = 0600;       // SOFTVERBS_DOMAIN_MODE: octal file mode of the registry
  uint64_t arena_bytes = 64ull << 30;  // SOFTVERBS_ARENA_GB: virtual size of each process arena
  unsigned attach_wait_s = 30;       // SOFTVERBS_ATTACH_WAIT_S: how long a process waits for another's slot claim
  MemPath mem_path = MemPath::kAuto;   // SOFTVERBS_MEM_PATH: auto|map|cma|bounce
  std::string device_name = "softverbs0";  // SOFTVERBS_DEVICE_NAME
  bool udp_offload = true;           // SOFTVERBS_UDP_OFFLOAD=0: RoCEv2 without UDP GSO/GRO
  unsigned net_slice_us = 100;       // SOFTVERBS_NET_SLICE_US: network thread's scheduler slice (0: kernel default)
  // SOFTVERBS_NET_NAP_US: while an application thread polls the network
  // itself (an empty CQ), the network thread stops watching the sockets,
  // in naps that double up to this long (0: it always wakes for each
  // packet). transport/roce_transport.cpp network_thread says why.
  unsigned net_nap_us = 1000;
  // SOFTVERBS_POLL_YIELD_US: a thread that has polled empty CQs with the
  // network in use for this long gives its core away (sched_yield) at each
  // further empty poll, until a completion or another thread's turn ends
  // the wait (0: never). core/idle_poll.h says why.
  unsigned poll_yield_us = 20;
  // SOFTVERBS_IO_URING=1: an application thread polling an empty CQ watches
  // an io_uring instead of asking the kernel with poll() each time
  // (transport/receive_watch.h). Off by default: measured here, an empty
  // poll gets free but each packet dearer (bench/receive_watch_ab.sh).
  bool io_uring = false;
  bool ignore_memlock = false;       // SOFTVERBS_MEMLOCK=ignore: registrations not held to RLIMIT_MEMLOCK (core/pinned_pages.h)
  bool infiniband = false;           // SOFTVERBS_LINK_LAYER=infiniband: the port shows an IB link layer and LIDs (core/lid.h)
  bool use_host_service = true;      // SOFTVERBS_HOSTD=off (or 0): never use the host service (util/host_service_socket.h)
  uint32_t host_service_uid = 0;     // SOFTVERBS_HOSTD_UID: the uid the host service runs as besides root
  std::string pcap_prefix;           // SOFTVERBS_PCAP: write packets to <prefix>.<pid>.pcap ("": no capture)
  // SOFTVERBS_STAT_AT_EXIT=1: a QP's RoCEv2 counters go to stderr when it is
  // destroyed and the device's when the process exits (softverbs-stat's
  // lines), for runs too short to be sampled (transport/roce_counters.h).
  bool stat_at_exit = false;
  // SOFTVERBS_PROFILE: the device to report and enforce (a built-in
  // profile's name or a profile file; "": softverbs' own). core/device_profile.h.
  std::string profile;
  // SOFTVERBS_FAULTS: rules of faults to inject (or a file of them); "":
  // none. core/faults.h.
  std::string faults;
  // SOFTVERBS_CHECK: warn|abort: the validation layer (core/check.h); "": off.
  std::string check;
  // SOFTVERBS_TRACE: the timeline goes to <prefix>.<pid>.json (core/trace.h); "": none.
  std::string trace;
};

// Parsed on first use; stable for the life of the process.
const Knobs& knobs();

// Knobs read each time they are used, not once: a program may set them
// after the knobs above were parsed, and what it set must count.

// SOFTVERBS_NETDEV: the interface raw packet QPs use ("" when unset: the
// first one that is up). Read when a raw port opens, because
// tests/verbs/raw_packet_test.cpp sets it inside a running test process
// (setenv, after earlier devices read the other knobs).
std::string knob_netdev();

}  // namespace sv
