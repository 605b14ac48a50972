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
  unsigned domain_mode = 0600;       // SOFTVERBS_DOMAIN_MODE: octal file mode of the registry
  uint64_t arena_bytes = 64ull << 30;  // SOFTVERBS_ARENA_GB: virtual size of each process arena
  MemPath mem_path = MemPath::kAuto;   // SOFTVERBS_MEM_PATH: auto|map|cma|bounce
  std::string device_name = "softverbs0";  // SOFTVERBS_DEVICE_NAME
  bool udp_offload = true;           // SOFTVERBS_UDP_OFFLOAD=0: RoCEv2 without UDP GSO/GRO
  unsigned net_slice_us = 100;       // SOFTVERBS_NET_SLICE_US: network thread's scheduler slice (0: kernel default)
  bool ignore_memlock = false;       // SOFTVERBS_MEMLOCK=ignore: registrations not held to RLIMIT_MEMLOCK (core/pinned_pages.h)
  bool infiniband = false;           // SOFTVERBS_LINK_LAYER=infiniband: the port shows an IB link layer and LIDs (core/lid.h)
};

// Parsed on first use; stable for the life of the process.
const Knobs& knobs();

}  // namespace sv
