#include "util/knobs.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace sv {
namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return (v && *v) ? v : nullptr;
}

Knobs parse() {
  Knobs k;
  if (const char* v = env("SOFTVERBS_LOG")) {
    static const char* const kNames[] = {"error", "warn", "info", "debug", "trace"};
    for (int i = 0; i < 5; ++i)
      if (!std::strcmp(v, kNames[i])) k.log_level = i;
    if (v[0] >= '0' && v[0] <= '4') k.log_level = v[0] - '0';
  }
  k.domain_named = env("SOFTVERBS_DOMAIN") != nullptr;
  k.domain_in_environment = std::getenv("SOFTVERBS_DOMAIN") != nullptr;
  k.domain = k.domain_named ? env("SOFTVERBS_DOMAIN") : "uid" + std::to_string(getuid());
  if (const char* v = env("SOFTVERBS_RUNTIME_DIR")) k.runtime_dir = v;
  if (const char* v = env("SOFTVERBS_DOMAIN_MODE")) k.domain_mode = std::strtoul(v, nullptr, 8) & 0777;
  if (const char* v = env("SOFTVERBS_ARENA_GB")) {
    unsigned long gb = std::strtoul(v, nullptr, 10);
    if (gb >= 1 && gb <= 4096) k.arena_bytes = static_cast<uint64_t>(gb) << 30;
  }
  if (const char* v = env("SOFTVERBS_ATTACH_WAIT_S")) {
    unsigned long s = std::strtoul(v, nullptr, 10);
    if (s >= 1 && s <= 86400) k.attach_wait_s = static_cast<unsigned>(s);
  }
  if (const char* v = env("SOFTVERBS_MEM_PATH")) {
    if (!std::strcmp(v, "map")) k.mem_path = MemPath::kMap;
    if (!std::strcmp(v, "cma")) k.mem_path = MemPath::kCma;
    if (!std::strcmp(v, "bounce")) k.mem_path = MemPath::kBounce;
  }
  if (const char* v = env("SOFTVERBS_DEVICE_NAME")) k.device_name = v;
  if (const char* v = env("SOFTVERBS_UDP_OFFLOAD")) k.udp_offload = std::strcmp(v, "0") != 0;
  if (const char* v = env("SOFTVERBS_NET_SLICE_US")) k.net_slice_us = std::strtoul(v, nullptr, 10);
  if (const char* v = env("SOFTVERBS_NET_NAP_US")) k.net_nap_us = std::strtoul(v, nullptr, 10);
  if (const char* v = env("SOFTVERBS_POLL_YIELD_US")) k.poll_yield_us = std::strtoul(v, nullptr, 10);
  if (const char* v = env("SOFTVERBS_IO_URING")) k.io_uring = std::strcmp(v, "1") == 0;
  if (const char* v = env("SOFTVERBS_MEMLOCK")) k.ignore_memlock = !std::strcmp(v, "ignore");
  if (const char* v = env("SOFTVERBS_LINK_LAYER")) k.infiniband = !std::strcmp(v, "infiniband") || !std::strcmp(v, "ib");
  if (const char* v = env("SOFTVERBS_HOSTD")) k.use_host_service = std::strcmp(v, "off") != 0 && std::strcmp(v, "0") != 0;
  if (const char* v = env("SOFTVERBS_HOSTD_UID")) k.host_service_uid = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
  if (const char* v = env("SOFTVERBS_PCAP")) k.pcap_prefix = v;
  if (const char* v = env("SOFTVERBS_STAT_AT_EXIT")) k.stat_at_exit = std::strcmp(v, "0") != 0;
  if (const char* v = env("SOFTVERBS_PROFILE")) k.profile = v;
  if (const char* v = env("SOFTVERBS_FAULTS")) k.faults = v;
  if (const char* v = env("SOFTVERBS_CHECK")) k.check = v;
  if (const char* v = env("SOFTVERBS_TRACE")) k.trace = v;
  return k;
}

}  // namespace

std::string knob_netdev() {
  const char* v = env("SOFTVERBS_NETDEV");
  return v ? v : "";
}

const Knobs& knobs() {
  // Never destroyed: the network thread reads the strings (domain,
  // pcap_prefix) while the process exits, after static destructors ran.
  static const Knobs& k = *new Knobs(parse());
  return k;
}

}  // namespace sv
