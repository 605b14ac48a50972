#include "transport/roce_capture.h"

#include <unistd.h>

#include <cstring>
#include <string>

#include "net/roce_frame.h"
#include "util/knobs.h"
#include "util/log.h"

namespace sv::roce {
namespace {

void synthetic_mac(const in6_addr& ip, uint8_t mac[6]) {
  mac[0] = 0x02;
  mac[1] = 0x00;
  std::memcpy(mac + 2, ip.s6_addr + 12, 4);
}

}  // namespace

Capture& Capture::get() {
  static Capture* c = new Capture();  // never destroyed: packets may flow until exit
  return *c;
}

Capture::Capture() { enabled_ = !knobs().pcap_prefix.empty(); }

void Capture::packet(const in6_addr& src, const in6_addr& dst, uint16_t src_port, uint16_t dst_port,
                     uint8_t traffic_class, const net::RocePacket& pkt, const uint8_t* payload, size_t len) {
  if (!enabled_) return;
  net::FrameAddrs a;
  synthetic_mac(src, a.src_mac);
  synthetic_mac(dst, a.dst_mac);
  a.src_ip = src;
  a.dst_ip = dst;
  a.udp_sport = src_port;
  a.udp_dport = dst_port;
  a.traffic_class = traffic_class;
  std::vector<uint8_t> frame = net::build_frame(a, pkt, payload, len);
  if (frame.empty()) return;
  std::lock_guard g(mu_);
  if (pid_ != getpid()) {
    writer_.close();
    pid_ = getpid();
    std::string path = knobs().pcap_prefix + "." + std::to_string(pid_) + ".pcap";
    if (!writer_.open(path)) {
      SV_WARN("SOFTVERBS_PCAP: cannot write %s: %s", path.c_str(), writer_.last_error().c_str());
      enabled_ = false;
      return;
    }
  }
  writer_.write(frame.data(), frame.size());
}

}  // namespace sv::roce
