// The addresses fuzz_roce_packet checks a datagram's ICRC for, which the
// corpus generator seals its packets with: so the seeds pass the check and
// the fuzzer starts from both of its outcomes.
#pragma once

#include "net/roce_datagram.h"
#include "net/roce_frame.h"

namespace sv::net::fuzz {

inline DatagramAddrs roce_fuzz_addrs(bool v4) {
  DatagramAddrs a;
  if (v4) {
    a.src_ip = v4_mapped(0x0100000a);  // 10.0.0.1, network order
    a.dst_ip = v4_mapped(0x0200000a);
  } else {
    a.src_ip.s6_addr[0] = a.dst_ip.s6_addr[0] = 0xfd;
    a.src_ip.s6_addr[15] = 1;
    a.dst_ip.s6_addr[15] = 2;
  }
  a.src_port = 0xc000;
  a.dst_port = kRoceUdpPort;
  return a;
}

}  // namespace sv::net::fuzz
