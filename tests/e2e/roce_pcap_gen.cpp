// Writes a pcap of RoCEv2 frames built by src/net, one per opcode of RC,
// UC and UD and some of XRC, for roce_tshark.sh to decode with Wireshark's
// InfiniBand dissector. Every header field gets a value of its own (so a
// field read from the wrong place shows), payloads of 0-9 bytes exercise
// the pad, some frames are IPv6, and some have FECN/BECN set (which the
// ICRC must ignore).
//
// Usage: roce_pcap_gen <out.pcap> <out.expect>. The expectation file has one
// line per frame and field, "<frame>\t<tshark field>\t<kind>\t<value>":
//   num       a number, compared numerically;
//   hex       a byte field, lowercase hex;
//   hex+icrc  a byte field that runs on over the ICRC, which the script
//             computes itself and appends (XRC: Wireshark 4.0 shows all
//             after the BTH as one unparsed "vendor" field).
#include <arpa/inet.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <vector>

#include "net/pcap_writer.h"
#include "net/roce_frame.h"
#include "net/roce_header.h"
#include "net/roce_opcode.h"
#include "net/udp_sport.h"

using namespace sv::net;

namespace {

constexpr uint32_t kLocalQpn = 0x11;

// The XRC opcodes written (Wireshark 4.0 names them but does not parse
// XRCETH, so the script checks less of them).
constexpr uint8_t kXrcSample[] = {0xA4, 0xA5, 0xAA, 0xAC, 0xB0, 0xB1, 0xB3, 0xB7};

const uint8_t kSyndromes[] = {aeth_ack(),
                              aeth_rnr_nak(14),
                              aeth_nak(NakCode::kPsnSequenceError),
                              aeth_nak(NakCode::kInvalidRequest),
                              aeth_nak(NakCode::kRemoteAccessError),
                              aeth_nak(NakCode::kRemoteOperationalError),
                              aeth_ack(0),
                              aeth_ack(10)};

std::string hex(const uint8_t* p, size_t n) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (size_t i = 0; i < n; ++i) {
    s += digits[p[i] >> 4];
    s += digits[p[i] & 15];
  }
  return s;
}

std::string hex32(uint32_t v) {
  char buf[9];
  std::snprintf(buf, sizeof buf, "%08x", v);
  return buf;
}

class Expectations {
 public:
  explicit Expectations(std::FILE* f) : f_(f) {}
  void num(uint32_t frame, const char* field, uint64_t v) {
    std::fprintf(f_, "%u\t%s\tnum\t%llu\n", frame, field, static_cast<unsigned long long>(v));
  }
  void bytes(uint32_t frame, const char* field, const std::string& hex, const char* kind = "hex") {
    std::fprintf(f_, "%u\t%s\t%s\t%s\n", frame, field, kind, hex.c_str());
  }
  void text(uint32_t frame, const char* field, const char* value) {
    std::fprintf(f_, "%u\t%s\tstr\t%s\n", frame, field, value);
  }

 private:
  std::FILE* f_;
};

// The extension headers as hex, written here with printf from the field
// values and the IBTA layouts rather than with the library's encoder.
std::string ext_hex(const OpcodeInfo& info, const RocePacket& p) {
  using enum Ext;
  std::string s;
  char buf[80];
  auto ull = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  for (size_t i = 0; i < info.ext_count; ++i) {
    switch (info.ext[i]) {
      case kXrceth: std::snprintf(buf, sizeof buf, "00%06x", p.xrceth.srqn); break;
      case kReth: std::snprintf(buf, sizeof buf, "%016llx%08x%08x", ull(p.reth.va), p.reth.rkey, p.reth.len); break;
      case kAeth: std::snprintf(buf, sizeof buf, "%02x%06x", p.aeth.syndrome, p.aeth.msn); break;
      case kAtomicEth:
        std::snprintf(buf, sizeof buf, "%016llx%08x%016llx%016llx", ull(p.atomic_eth.va), p.atomic_eth.rkey,
                      ull(p.atomic_eth.swap_add), ull(p.atomic_eth.compare));
        break;
      case kAtomicAckEth: std::snprintf(buf, sizeof buf, "%016llx", ull(p.atomic_ack)); break;
      case kImmDt: std::snprintf(buf, sizeof buf, "%08x", p.imm); break;
      case kIeth: std::snprintf(buf, sizeof buf, "%08x", p.ieth); break;
      case kDeth: std::snprintf(buf, sizeof buf, "%08x00%06x", p.deth.qkey, p.deth.src_qp); break;
    }
    s += buf;
  }
  return s;
}

// The packet of frame `n` (1-based) with opcode `info`, its values derived
// from n so that no two frames or fields agree by accident.
RocePacket packet_for(const OpcodeInfo& info, uint32_t n) {
  RocePacket p;
  p.bth.opcode = info.opcode;
  p.bth.se = n % 2;
  p.bth.mig = n % 3 == 1;
  p.bth.pkey = n % 3 == 0 ? static_cast<uint16_t>(0x8000 + n) : kDefaultPkey;
  p.bth.fecn = n % 5 == 0;
  p.bth.becn = n % 7 == 0;
  p.bth.dest_qp = 0x010000 + n * 0x111;
  p.bth.ack_req = n % 4 != 0;
  p.bth.psn = (0x100000 + n * 0x1234) & kMask24;
  p.xrceth.srqn = 0x00ABC0 + n;
  p.deth = {n % 2 ? kGsiQkey : 0x12345600 + n, 0x000100 + n};
  p.reth = {0x00007F0000000123ull + n * 0x1000ull, 0x1000 + n * 0x101, 4096 * n + 7};
  p.aeth = {kSyndromes[n % std::size(kSyndromes)], 0x00AB00 + n};
  p.atomic_eth = {0x00007F00DEAD0000ull + n * 8, 0xA0000000u + n, 0xFEDCBA9876543210ull + n,
                  0x0123456789ABCDEFull + n};
  p.atomic_ack = 0xCAFEBABE00000000ull + n;
  p.imm = 0x11223300 + n;
  p.ieth = 0x55667700 + n;
  return p;
}

FrameAddrs addrs_for(const RocePacket& p, uint32_t n) {
  FrameAddrs a;
  const uint8_t src_mac[6] = {0x02, 0, 0, 0, 0, 0x01}, dst_mac[6] = {0x02, 0, 0, 0, 0, 0x02};
  std::copy(src_mac, src_mac + 6, a.src_mac);
  std::copy(dst_mac, dst_mac + 6, a.dst_mac);
  if (n % 4 == 0) {
    inet_pton(AF_INET6, "fd00::1", &a.src_ip);
    inet_pton(AF_INET6, "fd00::2", &a.dst_ip);
    a.flow_label = (n * 0x1111) & 0xFFFFF;
  } else {
    a.src_ip = v4_mapped(htonl(0x0A000001));
    a.dst_ip = v4_mapped(htonl(0x0A000002));
  }
  a.traffic_class = n % 3 == 0 ? 0x68 : 0;
  a.hop_limit = 64;
  a.udp_sport = p.bth.opcode >> 5 == kTransportUd >> 5 ? ud_udp_sport(p.deth.src_qp)
                                                        : rc_udp_sport(0, kLocalQpn, p.bth.dest_qp);
  return a;
}

// What Wireshark 4.0 shows for the frame: addresses, the BTH, and the
// extension headers it parses (none of an XRC opcode).
void expect(Expectations& e, uint32_t n, const OpcodeInfo& info, const FrameAddrs& a, const RocePacket& p,
            const std::vector<uint8_t>& payload) {
  using enum Ext;
  if (a.ipv4()) {
    e.text(n, "ip.src", "10.0.0.1");
    e.text(n, "ip.dst", "10.0.0.2");
    e.num(n, "ip.dsfield", a.traffic_class);
    e.num(n, "ip.ttl", a.hop_limit);
    e.num(n, "ip.flags.df", 1);
    e.num(n, "ip.checksum.status", 1);   // good
    e.num(n, "udp.checksum.status", 3);  // not present: 0, as rxe sends
  } else {
    e.text(n, "ipv6.src", "fd00::1");
    e.text(n, "ipv6.dst", "fd00::2");
    e.num(n, "ipv6.tclass", a.traffic_class);
    e.num(n, "ipv6.flow", a.flow_label);
    e.num(n, "ipv6.hlim", a.hop_limit);
    e.num(n, "udp.checksum.status", 1);  // good: mandatory in IPv6
  }
  e.num(n, "udp.srcport", a.udp_sport);
  e.num(n, "udp.dstport", kRoceUdpPort);
  e.num(n, "infiniband.bth.opcode", p.bth.opcode);
  e.num(n, "infiniband.bth.se", p.bth.se);
  e.num(n, "infiniband.bth.m", p.bth.mig);
  e.num(n, "infiniband.bth.padcnt", pad_for(payload.size()));
  e.num(n, "infiniband.bth.tver", 0);
  e.num(n, "infiniband.bth.p_key", p.bth.pkey);
  char congestion[3];
  std::snprintf(congestion, sizeof congestion, "%02x", (p.bth.fecn ? 0x80 : 0) | (p.bth.becn ? 0x40 : 0));
  e.bytes(n, "infiniband.reserved", congestion);  // BTH byte 4: FECN, BECN
  e.num(n, "infiniband.bth.destqp", p.bth.dest_qp);
  e.num(n, "infiniband.bth.a", p.bth.ack_req);
  e.num(n, "infiniband.bth.psn", p.bth.psn);
  std::string data = hex(payload.data(), payload.size()) + std::string(2 * pad_for(payload.size()), '0');
  if (info.transport() == kTransportXrc) {
    e.bytes(n, "infiniband.vendor", ext_hex(info, p) + data, "hex+icrc");
    return;
  }
  if (info.has(kDeth)) {
    e.num(n, "infiniband.deth.q_key", p.deth.qkey);
    e.num(n, "infiniband.deth.srcqp", p.deth.src_qp);
  }
  if (info.has(kReth)) {
    e.num(n, "infiniband.reth.va", p.reth.va);
    e.num(n, "infiniband.reth.r_key", p.reth.rkey);
    e.num(n, "infiniband.reth.dmalen", p.reth.len);
  }
  if (info.has(kAtomicEth)) {  // Wireshark files its VA and R_Key under RETH's names
    e.num(n, "infiniband.reth.va", p.atomic_eth.va);
    e.num(n, "infiniband.reth.r_key", p.atomic_eth.rkey);
    e.num(n, "infiniband.atomiceth.swapdt", p.atomic_eth.swap_add);
    e.num(n, "infiniband.atomiceth.cmpdt", p.atomic_eth.compare);
  }
  if (info.has(kAeth)) {
    e.num(n, "infiniband.aeth.syndrome", p.aeth.syndrome);
    // Bits 6:5 the type (0 ACK, 1 RNR NAK, 3 NAK), bits 4:0 what it says.
    unsigned type = p.aeth.syndrome >> 5 & 3, value = p.aeth.syndrome & 0x1F;
    e.num(n, "infiniband.aeth.syndrome.opcode", type);
    e.num(n, type == 0 ? "infiniband.aeth.syndrome.credit_count"
                       : type == 1 ? "infiniband.aeth.syndrome.timer" : "infiniband.aeth.syndrome.error_code",
          value);
    e.num(n, "infiniband.aeth.msn", p.aeth.msn);
  }
  if (info.has(kAtomicAckEth)) e.num(n, "infiniband.atomicacketh.origremdt", p.atomic_ack);
  if (info.has(kImmDt)) e.bytes(n, "infiniband.immdt", hex32(p.imm));
  if (info.has(kIeth)) e.bytes(n, "infiniband.ieth", hex32(p.ieth));
  if (!data.empty()) e.bytes(n, "data.data", data);  // Wireshark shows the pad with the payload
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s out.pcap out.expect\n", argv[0]);
    return 2;
  }
  PcapWriter pcap;
  if (!pcap.open(argv[1])) {
    std::fprintf(stderr, "%s\n", pcap.last_error().c_str());
    return 1;
  }
  std::FILE* f = std::fopen(argv[2], "w");
  if (!f) {
    std::perror(argv[2]);
    return 1;
  }
  Expectations e(f);

  std::vector<const OpcodeInfo*> opcodes;
  for (const OpcodeInfo& info : opcode_table())
    if (info.transport() != kTransportXrc) opcodes.push_back(&info);
  for (uint8_t op : kXrcSample) opcodes.push_back(opcode_info(op));

  uint32_t n = 0;
  for (const OpcodeInfo* info : opcodes) {
    ++n;
    RocePacket p = packet_for(*info, n);
    std::vector<uint8_t> payload;
    if (info->is(kPayload)) payload.resize(n % 10 == 9 ? 300 : n % 10);
    for (size_t k = 0; k < payload.size(); ++k) payload[k] = static_cast<uint8_t>(n * 31 + k);
    FrameAddrs a = addrs_for(p, n);
    std::vector<uint8_t> frame = build_frame(a, p, payload.data(), payload.size());
    if (frame.empty()) {
      std::fprintf(stderr, "build_frame failed for %s\n", info->name);
      return 1;
    }
    auto when = std::chrono::system_clock::time_point{std::chrono::seconds(1700000000 + n)};
    if (!pcap.write(frame.data(), frame.size(), when)) {
      std::fprintf(stderr, "%s\n", pcap.last_error().c_str());
      return 1;
    }
    expect(e, n, *info, a, p, payload);
  }
  bool ok = pcap.close() && std::fclose(f) == 0;
  std::printf("%u frames\n", n);
  return ok ? 0 : 1;
}
