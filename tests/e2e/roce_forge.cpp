// Forged RoCEv2 requests, as an attacker on the path (or the peer host)
// sends them: well-formed packets with a valid ICRC, aimed at a live QP.
//   roce_forge SRC_IP DST_IP DST_QPN KIND COUNT
// KIND:
//   read_huge    RDMA READ requests, random PSNs (half of them "in the
//                past"), RETH length 0xffffffff, random rkey and address
//   read_badkey  the same with a length of 64
//   uc_send      UC SEND ONLY packets (another transport's opcode) to the QP
// Sent from a UDP socket bound to SRC_IP, so they pass the receiver's check
// of the connected peer's address. Built by src/net, as our sender builds them.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "net/roce_datagram.h"
#include "net/roce_frame.h"
#include "net/roce_header.h"
#include "net/roce_opcode.h"

using namespace sv::net;

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: %s SRC_IP DST_IP DST_QPN read_huge|read_badkey|uc_send COUNT\n", argv[0]);
    return 2;
  }
  const std::string kind = argv[4];
  const uint32_t qpn = static_cast<uint32_t>(std::strtoul(argv[3], nullptr, 0));
  const int count = std::atoi(argv[5]);
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  int pmtu = IP_PMTUDISC_DO;  // DF set, IP ID 0: what the ICRC was computed for
  setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
  sockaddr_in src{}, dst{};
  src.sin_family = dst.sin_family = AF_INET;
  inet_pton(AF_INET, argv[1], &src.sin_addr);
  inet_pton(AF_INET, argv[2], &dst.sin_addr);
  dst.sin_port = htons(4791);
  if (bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) return perror("bind"), 1;
  socklen_t len = sizeof src;
  getsockname(fd, reinterpret_cast<sockaddr*>(&src), &len);
  DatagramAddrs addrs;
  addrs.src_ip = v4_mapped(src.sin_addr.s_addr);
  addrs.dst_ip = v4_mapped(dst.sin_addr.s_addr);
  addrs.src_port = ntohs(src.sin_port);
  addrs.dst_port = 4791;
  std::mt19937 rng(12345);
  std::vector<uint8_t> buf(kDatagramHeadroom + kDatagramOverhead + 64);
  const uint8_t payload[16] = {};
  int sent = 0;
  for (int i = 0; i < count; ++i) {
    RocePacket p;
    p.bth.dest_qp = qpn;
    p.bth.psn = rng() & 0xffffff;
    p.bth.ack_req = true;
    size_t n = 0;
    if (kind == "uc_send") {
      p.bth.opcode = kTransportUc | kSendOnly;
      n = build_datagram(addrs, p, payload, sizeof payload, buf.data());
    } else {
      p.bth.opcode = kTransportRc | kReadRequest;
      p.reth.va = (uint64_t{rng()} << 32) | rng();
      p.reth.rkey = rng();
      p.reth.len = kind == "read_huge" ? 0xffffffffu : 64;
      n = build_datagram(addrs, p, nullptr, 0, buf.data());
    }
    if (n && sendto(fd, buf.data() + kDatagramHeadroom, n, 0, reinterpret_cast<sockaddr*>(&dst), sizeof dst) ==
                 static_cast<ssize_t>(n))
      ++sent;
    if (i % 16 == 15) usleep(1000);  // a steady stream, not a burst the socket drops
  }
  std::printf("sent %d forged %s packets to QPN %#x\n", sent, kind.c_str(), qpn);
  return sent == count ? 0 : 1;
}
