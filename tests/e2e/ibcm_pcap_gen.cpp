// Writes a pcap of RoCEv2 frames, each carrying one IB CM MAD encoded by
// src/ibcm, for ibcm_tshark.sh to decode with Wireshark's dissector. The
// field values here are the ones that script expects to read back.
//
// Frame: Ethernet / IPv4 / UDP (dst 4791) / BTH (UD SEND_ONLY 0x64 to QP1)
// / DETH (GSI Q_Key 0x80010000, source QP 1) / 256-byte MAD / ICRC
// (docs: /work/shared/brief/wire.md; ICRC as Linux rxe_icrc.c computes it).
#include <arpa/inet.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "ibcm/cm_messages.h"
#include "ibcm/cma_header.h"
#include "ibcm/mad_header.h"

using namespace sv::ibcm;

namespace {

void put16(std::vector<uint8_t>& v, uint16_t x) {
  v.push_back(static_cast<uint8_t>(x >> 8));
  v.push_back(static_cast<uint8_t>(x));
}
void put32(std::vector<uint8_t>& v, uint32_t x) {
  put16(v, static_cast<uint16_t>(x >> 16));
  put16(v, static_cast<uint16_t>(x));
}

uint32_t crc32_update(uint32_t crc, const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return crc;
}

uint16_t ip_checksum(const uint8_t* p, size_t n) {
  uint32_t sum = 0;
  for (size_t i = 0; i < n; i += 2) sum += (p[i] << 8) | p[i + 1];
  while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

constexpr size_t kEth = 14, kIp = 20, kUdp = 8, kBth = 12, kDeth = 8;

std::vector<uint8_t> roce_frame(const std::array<uint8_t, kMadSize>& mad, uint32_t psn) {
  std::vector<uint8_t> f;
  const uint8_t dst_mac[6] = {0x02, 0, 0, 0, 0, 0x02}, src_mac[6] = {0x02, 0, 0, 0, 0, 0x01};
  f.insert(f.end(), dst_mac, dst_mac + 6);
  f.insert(f.end(), src_mac, src_mac + 6);
  put16(f, 0x0800);
  const uint16_t udp_len = kUdp + kBth + kDeth + kMadSize + 4;
  // IPv4: DF, TTL 64, UDP, 10.0.0.1 -> 10.0.0.2.
  f.push_back(0x45);
  f.push_back(0);
  put16(f, kIp + udp_len);
  put16(f, static_cast<uint16_t>(psn));
  put16(f, 0x4000);
  f.push_back(64);
  f.push_back(17);
  put16(f, 0);
  put32(f, 0x0A000001);
  put32(f, 0x0A000002);
  uint16_t csum = ip_checksum(f.data() + kEth, kIp);
  f[kEth + 10] = static_cast<uint8_t>(csum >> 8);
  f[kEth + 11] = static_cast<uint8_t>(csum);
  // UDP, checksum 0 as rxe sends it.
  put16(f, 0xC001);
  put16(f, 4791);
  put16(f, udp_len);
  put16(f, 0);
  // BTH: UD SEND_ONLY, P_Key 0xffff, dest QP 1, PSN.
  f.push_back(0x64);
  f.push_back(0);
  put16(f, 0xffff);
  put32(f, kGsiQpn);
  put32(f, psn & 0xffffff);
  // DETH: GSI Q_Key, source QP 1.
  put32(f, kGsiQkey);
  put32(f, kGsiQpn);
  f.insert(f.end(), mad.begin(), mad.end());
  // ICRC over the masked IP, UDP and BTH headers and everything after.
  std::vector<uint8_t> m(f.begin() + kEth, f.end());
  m[1] = 0xff;                      // TOS
  m[8] = 0xff;                      // TTL
  m[10] = m[11] = 0xff;             // header checksum
  m[kIp + 6] = m[kIp + 7] = 0xff;   // UDP checksum
  m[kIp + kUdp + 4] = 0xff;         // BTH FECN/BECN/resv6
  const uint8_t lrh[8] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};
  uint32_t crc = ~crc32_update(crc32_update(0xffffffffu, lrh, 8), m.data(), m.size());
  for (int i = 0; i < 4; ++i) f.push_back(static_cast<uint8_t>(crc >> (8 * i)));  // little-endian
  return f;
}

template <size_t N>
void fill_text(std::array<uint8_t, N>& a, const char* s, size_t at = 0) {
  std::memcpy(a.data() + at, s, std::strlen(s));
}

std::vector<CmMessage> messages() {
  std::vector<CmMessage> out;

  Req req;
  req.local_comm_id = 0x11223344;
  req.service_id = ip_service_id(PortSpace::kTcp, 7471);
  req.local_ca_guid = 0x0002C9FFFE123456;
  req.local_qkey = 0x01234567;
  req.local_qpn = 0x0ABCDE;
  req.responder_resources = 4;
  req.initiator_depth = 3;
  req.remote_cm_response_timeout = 20;
  req.transport_service = TransportService::kRc;
  req.end_to_end_flow_control = 1;
  req.starting_psn = 0x654321;
  req.local_cm_response_timeout = 18;
  req.retry_count = 7;
  req.pkey = 0xffff;
  req.path_mtu = 3;  // IBV_MTU_1024
  req.rnr_retry_count = 6;
  req.max_cm_retries = 15;
  req.srq = 1;
  req.primary.local_port_lid = 0xffff;
  req.primary.remote_port_lid = 0xffff;
  inet_pton(AF_INET6, "::ffff:10.0.0.1", req.primary.local_port_gid.data());
  inet_pton(AF_INET6, "::ffff:10.0.0.2", req.primary.remote_port_gid.data());
  req.primary.flow_label = 0x12345;
  req.primary.packet_rate = 7;
  req.primary.traffic_class = 0x68;
  req.primary.hop_limit = 64;
  req.primary.sl = 5;
  req.primary.subnet_local = 0;
  req.primary.local_ack_timeout = 14;
  sockaddr_in src{}, dst{};
  src.sin_family = dst.sin_family = AF_INET;
  src.sin_port = htons(40000);
  dst.sin_port = htons(7471);
  inet_pton(AF_INET, "10.0.0.1", &src.sin_addr);
  inet_pton(AF_INET, "10.0.0.2", &dst.sin_addr);
  encode_cma_header(*cma_header_from(reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst)),
                    std::span(req.private_data).first<kCmaHeaderSize>());
  fill_text(req.private_data, "user", kCmaHeaderSize);
  out.push_back({0x0000000100000001, req});

  Rep rep;
  rep.local_comm_id = 0x55667788;
  rep.remote_comm_id = 0x11223344;
  rep.local_qkey = 0x89ABCDEF;
  rep.local_qpn = 0x0BCDEF;
  rep.starting_psn = 0x123456;
  rep.responder_resources = 2;
  rep.initiator_depth = 1;
  rep.target_ack_delay = 9;
  rep.failover_accepted = 0;
  rep.end_to_end_flow_control = 1;
  rep.rnr_retry_count = 5;
  rep.srq = 1;
  rep.local_ca_guid = 0x0002C9FFFE654321;
  fill_text(rep.private_data, "rep-data");
  out.push_back({0x0000000200000001, rep});

  Rtu rtu;
  rtu.local_comm_id = 0x11223344;
  rtu.remote_comm_id = 0x55667788;
  out.push_back({0x0000000100000002, rtu});

  Rej rej;
  rej.local_comm_id = 0x55667788;
  rej.remote_comm_id = 0x11223344;
  rej.message_rejected = MessageResponded::kRep;
  rej.reject_info_length = 3;
  rej.ari[0] = 0xA1;
  rej.ari[1] = 0xA2;
  rej.ari[2] = 0xA3;
  rej.reason = static_cast<uint16_t>(RejReason::kConsumerDefined);
  fill_text(rej.private_data, "no-thanks");
  out.push_back({0x0000000200000002, rej});

  Dreq dreq;
  dreq.local_comm_id = 0x11223344;
  dreq.remote_comm_id = 0x55667788;
  dreq.remote_qpn_eecn = 0x0BCDEF;
  out.push_back({0x0000000100000003, dreq});

  Drep drep;
  drep.local_comm_id = 0x55667788;
  drep.remote_comm_id = 0x11223344;
  out.push_back({0x0000000200000003, drep});

  Mra mra;
  mra.local_comm_id = 0x55667788;
  mra.remote_comm_id = 0x11223344;
  mra.message_mraed = MessageResponded::kRep;
  mra.service_timeout = 21;
  out.push_back({0x0000000200000004, mra});

  SidrReq sreq;
  sreq.request_id = 0xCAFEF00D;
  sreq.pkey = 0xffff;
  sreq.service_id = ip_service_id(PortSpace::kUdp, 7471);
  encode_cma_header(*cma_header_from(reinterpret_cast<sockaddr*>(&src), reinterpret_cast<sockaddr*>(&dst)),
                    std::span(sreq.private_data).first<kCmaHeaderSize>());
  out.push_back({0x0000000100000004, sreq});

  SidrRep srep;
  srep.request_id = 0xCAFEF00D;
  srep.status = static_cast<uint8_t>(SidrStatus::kSuccess);
  srep.qpn = 0x0C0FFE;
  srep.service_id = ip_service_id(PortSpace::kUdp, 7471);
  srep.qkey = 0x01234567;
  out.push_back({0x0000000200000005, srep});

  // A REQ between IPv6 addresses (cma_hdr IP version 6).
  // Its other bits differ from the first REQ's so that every REQ bit field
  // is seen non-zero once: XRC (extended transport 1), RDC exists, subnet local.
  Req req6 = req;
  req6.local_comm_id = 0x99AABBCC;
  req6.transport_service = TransportService::kExtended;
  req6.extended_transport_type = kExtendedTransportXrc;
  req6.rdc_exists = 1;
  req6.primary.subnet_local = 1;
  req6.primary.sl = 0xF;
  sockaddr_in6 src6{}, dst6{};
  src6.sin6_family = dst6.sin6_family = AF_INET6;
  src6.sin6_port = htons(40001);
  dst6.sin6_port = htons(7471);
  inet_pton(AF_INET6, "fd00::1", &src6.sin6_addr);
  inet_pton(AF_INET6, "fd00::2", &dst6.sin6_addr);
  inet_pton(AF_INET6, "fd00::1", req6.primary.local_port_gid.data());
  inet_pton(AF_INET6, "fd00::2", req6.primary.remote_port_gid.data());
  req6.private_data = {};
  encode_cma_header(*cma_header_from(reinterpret_cast<sockaddr*>(&src6), reinterpret_cast<sockaddr*>(&dst6)),
                    std::span(req6.private_data).first<kCmaHeaderSize>());
  out.push_back({0x0000000100000005, req6});
  return out;
}

void le32(std::FILE* f, uint32_t x) { std::fwrite(&x, 4, 1, f); }  // pcap is host order
void le16(std::FILE* f, uint16_t x) { std::fwrite(&x, 2, 1, f); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s out.pcap\n", argv[0]);
    return 2;
  }
  std::FILE* f = std::fopen(argv[1], "wb");
  if (!f) {
    std::perror(argv[1]);
    return 1;
  }
  le32(f, 0xa1b2c3d4);
  le16(f, 2);
  le16(f, 4);
  le32(f, 0);
  le32(f, 0);
  le32(f, 65535);
  le32(f, 1);  // LINKTYPE_ETHERNET
  uint32_t psn = 1;
  for (const CmMessage& m : messages()) {
    std::vector<uint8_t> frame = roce_frame(encode(m), psn);
    le32(f, 1700000000 + psn);
    le32(f, 0);
    le32(f, static_cast<uint32_t>(frame.size()));
    le32(f, static_cast<uint32_t>(frame.size()));
    std::fwrite(frame.data(), 1, frame.size(), f);
    ++psn;
  }
  return std::fclose(f) == 0 ? 0 : 1;
}
