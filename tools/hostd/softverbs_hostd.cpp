// softverbs-hostd: the optional host service (hostd/service.h,
// docs/ARCHITECTURE.md "Security"). One per network namespace, started
// before any user can take UDP port 4791, run by root (or by the uid
// processes are told in SOFTVERBS_HOSTD_UID).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "net/roce_frame.h"
#include "service.h"
#include "util/host_service_socket.h"
#include "util/short_slice.h"

namespace {

volatile int g_stop = 0;
void on_signal(int) { g_stop = 1; }

int usage() {
  std::fprintf(stderr,
               "usage: softverbs-hostd [-v] [--max-connections N] [--no-steering] [--state-dir DIR]\n"
               "The softverbs host service for this network namespace: owns UDP port %u, leases QP number\n"
               "ranges host-wide and hands each RoCEv2 packet to the process whose QP it is for. Run it as root\n"
               "(or as the uid set in users' SOFTVERBS_HOSTD_UID) before users start RDMA programs.\n"
               "  -v, --verbose          say who connects, leases and leaves\n"
               "  --max-connections N    at most N connections (default: what the file limit leaves);\n"
               "                         no user gets more than half, or an equal share of them\n"
               "  --no-steering          hand every datagram on through the service, even where the kernel\n"
               "                         could steer them to processes (a BPF program, as root)\n"
               "  --state-dir DIR        where leases and CM claims outlive a restart (default\n"
               "                         /run/softverbs-hostd; \"\": nowhere)\n",
               sv::net::kRoceUdpPort);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  sv::hostd::Service::Options opt;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "-v") || !std::strcmp(argv[i], "--verbose")) {
      opt.verbose = true;
    } else if (!std::strcmp(argv[i], "--state-dir") && i + 1 < argc) {
      opt.state_dir = argv[++i];
    } else if (!std::strcmp(argv[i], "--no-steering")) {
      opt.steer = false;
    } else if (!std::strcmp(argv[i], "--max-connections") && i + 1 < argc) {
      opt.max_connections = std::strtoul(argv[++i], nullptr, 0);
    } else {
      return usage();
    }
  }
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Woken by a packet, the service must get a core now, though polling
  // applications hold them all (as the processes' network threads do).
  sv::request_short_slice(100'000);
  sv::hostd::Service s(opt);
  if (!s.open()) return 1;
  std::fprintf(stderr, "softverbs-hostd: serving UDP port %u and @%s in this network namespace\n",
               sv::net::kRoceUdpPort, sv::kHostServiceSocket);
  s.run(&g_stop);
  s.save_state();
  const sv::hostd::Counters& n = s.counters();
  std::fprintf(stderr,
               "softverbs-hostd: stopped; %llu datagrams forwarded, %llu for no leased QP, %llu lost to a full "
               "process queue, %llu malformed, %llu UDP from a local address dropped, %llu with a forged source, "
               "%llu connections refused\n",
               static_cast<unsigned long long>(n.forwarded), static_cast<unsigned long long>(n.no_owner),
               static_cast<unsigned long long>(n.owner_busy), static_cast<unsigned long long>(n.malformed),
               static_cast<unsigned long long>(n.local_udp), static_cast<unsigned long long>(n.forged_source),
               static_cast<unsigned long long>(n.refused));
  return 0;
}
