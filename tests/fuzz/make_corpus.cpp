// Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/): real
// packets and MADs, built by our own encoders, one small file each.
//   fuzz_make_corpus CORPUS_DIR
// roce_packet/: a datagram of every opcode of the table (IPv4 ICRC, as
// fuzz_roce_packet checks it), one with an IPv6 ICRC, and whole frames.
// cm_mad/: every CM message, REQ and SIDR REQ with an rdma_cm header (IPv4
// and IPv6), and a MAD cut short.
#include <arpa/inet.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ibcm/cm_messages.h"
#include "ibcm/cma_header.h"
#include "net/roce_datagram.h"
#include "net/roce_frame.h"
#include "net/roce_header.h"
#include "net/roce_opcode.h"
#include "roce_fuzz_addrs.h"

namespace {

namespace fs = std::filesystem;

void write(const fs::path& file, const uint8_t* data, size_t len) {
  std::ofstream(file, std::ios::binary).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(len));
}

sv::net::RocePacket packet(uint8_t opcode) {
  sv::net::RocePacket p;
  p.bth.opcode = opcode;
  p.bth.dest_qp = 0x10011;
  p.bth.psn = 0x123456;
  p.bth.ack_req = true;
  p.reth = {0x7f0000001000, 0x1234, 4096};
  p.aeth = {sv::net::aeth_ack(), 7};
  p.atomic_eth = {0x7f0000002000, 0x5678, 1, 2};
  p.deth = {sv::net::kGsiQkey, 1};
  p.imm = 0xdeadbeef;
  p.ieth = 0x1234;
  p.xrceth.srqn = 3;
  return p;
}

void roce_packets(const fs::path& dir) {
  using namespace sv::net;
  const std::vector<uint8_t> payload(13, 0x5a);  // not a multiple of 4: a pad
  for (const OpcodeInfo& op : opcode_table()) {
    const size_t len = op.is(kPayload) ? payload.size() : 0;
    std::vector<uint8_t> buf(kDatagramHeadroom + kDatagramOverhead + len);
    const size_t n = build_datagram(fuzz::roce_fuzz_addrs(true), packet(op.opcode), payload.data(), len, buf.data());
    write(dir / op.name, buf.data() + kDatagramHeadroom, n);
  }
  std::vector<uint8_t> buf(kDatagramHeadroom + kDatagramOverhead + payload.size());
  const size_t n = build_datagram(fuzz::roce_fuzz_addrs(false), packet(kTransportRc | kSendOnly), payload.data(),
                                  payload.size(), buf.data());
  write(dir / "RC_SEND_ONLY.ipv6", buf.data() + kDatagramHeadroom, n);
  for (bool v4 : {true, false}) {
    FrameAddrs f;
    f.src_ip = fuzz::roce_fuzz_addrs(v4).src_ip;
    f.dst_ip = fuzz::roce_fuzz_addrs(v4).dst_ip;
    const auto frame = build_frame(f, packet(kTransportRc | kWriteOnlyImm), payload.data(), payload.size());
    write(dir / (v4 ? "frame.ipv4" : "frame.ipv6"), frame.data(), frame.size());
  }
}

void cm_mads(const fs::path& dir) {
  using namespace sv::ibcm;
  auto put = [&](const char* name, CmBody body, size_t len = kMadSize) {
    const auto mad = encode(CmMessage{0x1122334455667788, std::move(body)});
    write(dir / name, mad.data(), len);
  };
  auto cma = [](bool v4, auto& private_data) {
    sockaddr_storage src{}, dst{};
    if (v4) {
      auto* s = reinterpret_cast<sockaddr_in*>(&src);
      auto* d = reinterpret_cast<sockaddr_in*>(&dst);
      s->sin_family = d->sin_family = AF_INET;
      s->sin_port = htons(40000);
      inet_pton(AF_INET, "10.0.0.1", &s->sin_addr);
      inet_pton(AF_INET, "10.0.0.2", &d->sin_addr);
    } else {
      auto* s = reinterpret_cast<sockaddr_in6*>(&src);
      auto* d = reinterpret_cast<sockaddr_in6*>(&dst);
      s->sin6_family = d->sin6_family = AF_INET6;
      s->sin6_port = htons(40000);
      inet_pton(AF_INET6, "fd00::1", &s->sin6_addr);
      inet_pton(AF_INET6, "fd00::2", &d->sin6_addr);
    }
    const auto h = cma_header_from(reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst));
    encode_cma_header(*h, std::span<uint8_t, kCmaHeaderSize>(private_data.data(), kCmaHeaderSize));
  };
  for (bool v4 : {true, false}) {
    Req req;
    req.local_comm_id = 0x1001;
    req.service_id = kIpServiceIdPrefix | ip_service_id(PortSpace::kTcp, 7471);
    req.local_qpn = 0x10011;
    req.starting_psn = 0x123456;
    req.responder_resources = req.initiator_depth = 16;
    req.path_mtu = 3;
    req.retry_count = req.rnr_retry_count = 7;
    req.max_cm_retries = 15;
    cma(v4, req.private_data);
    put(v4 ? "req.ipv4" : "req.ipv6", req);
    SidrReq sidr;
    sidr.request_id = 0x2002;
    sidr.service_id = kIpServiceIdPrefix | ip_service_id(PortSpace::kUdp, 7471);
    cma(v4, sidr.private_data);
    put(v4 ? "sidr_req.ipv4" : "sidr_req.ipv6", sidr);
  }
  Rep rep;
  rep.local_comm_id = 0x3003;
  rep.remote_comm_id = 0x1001;
  rep.local_qpn = 0x20022;
  rep.starting_psn = 0x654321;
  put("rep", rep);
  put("rtu", Rtu{0x1001, 0x3003, {}});
  Rej rej;
  rej.remote_comm_id = 0x1001;
  rej.reason = static_cast<uint16_t>(RejReason::kInvalidServiceId);
  rej.reject_info_length = kRejAriSize;
  put("rej", rej);
  put("mra", Mra{0x3003, 0x1001, MessageResponded::kRep, 20, {}});
  put("dreq", Dreq{0x1001, 0x3003, 0x20022, {}});
  put("drep", Drep{0x3003, 0x1001, {}});
  SidrRep sidr_rep;
  sidr_rep.request_id = 0x2002;
  sidr_rep.qpn = 0x20022;
  sidr_rep.qkey = 0x12345678;
  sidr_rep.additional_information_length = kSidrRepInfoSize;
  put("sidr_rep", sidr_rep);
  put("rtu.truncated", Rtu{0x1001, 0x3003, {}}, 100);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]), 2;
  const fs::path root = argv[1];
  fs::create_directories(root / "roce_packet");
  fs::create_directories(root / "cm_mad");
  roce_packets(root / "roce_packet");
  cm_mads(root / "cm_mad");
  return 0;
}
