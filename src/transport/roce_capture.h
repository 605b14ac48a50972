// SOFTVERBS_PCAP=<prefix>: every RoCEv2 packet this process sends or
// receives, written to <prefix>.<pid>.pcap as the Ethernet frame the wire
// carries (IP and UDP headers as the kernel writes them, IP ID 0; MAC
// addresses synthetic, 02:00 and the IPv4 address or the IPv6 address's
// last four bytes), so tshark shows what softverbs did without a capture
// privilege. Costs one branch per packet when unset.
#pragma once

#include <netinet/in.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "net/pcap_writer.h"
#include "net/roce_header.h"
#include "util/private_heap.h"

namespace sv::roce {

class Capture : public PrivateHeapObject {
 public:
  static Capture& get();
  bool enabled() const { return enabled_; }
  void packet(const in6_addr& src, const in6_addr& dst, uint16_t src_port, uint16_t dst_port, uint8_t traffic_class,
              const net::RocePacket& pkt, const uint8_t* payload, size_t len);

 private:
  Capture();
  bool enabled_ = false;
  std::mutex mu_;
  pid_t pid_ = 0;  // the process the file is for (a fork()ed child opens its own)
  net::PcapWriter writer_;
};

}  // namespace sv::roce
