// Malformed RoCEv2 datagrams against a live RC connection, as a hostile
// network sends them: every class of damage the receiver must shrug off
// (drop, or NAK with the spec's syndrome) without crashing, growing, or
// breaking the connection it serves.
//   roce_fuzz SRC_IP STRANGER_IP DST_IP QPN SEND_PSN RECV_PSN ITERS SEED COUNT [CLASS,...]
// QPN is the server's QP; SEND_PSN its first send PSN and RECV_PSN the first
// it expects (the client's), both as ibv_rc_pingpong prints them; ITERS the
// ping-pong's iterations. COUNT datagrams of each class (all of kClasses, or
// those named) go out, in an order shuffled by SEED (printed, so a failure
// can be replayed).
//
// Most packets are sealed with a valid ICRC and sent from SRC_IP, the
// connected peer's address, so that they pass both checks and reach the
// decoders behind them. They keep clear of the PSNs the connection is
// using: RoCE has no authentication, and a packet with the PSN the
// responder expects is the peer's as far as any NIC can tell. A blind
// attacker does not know those PSNs. The `stranger` class is an attacker on
// the path who does: it watches the link (a packet socket) for the PSNs in
// use and sends NAKs and SENDs with them from STRANGER_IP, which is not the
// peer's address; they must be dropped for that alone, as rxe's check_addr
// drops them. (Its PSNs depend on timing; everything else follows SEED.)
#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "ibcm/cm_messages.h"
#include "ibcm/cma_header.h"
#include "net/roce_datagram.h"
#include "net/roce_frame.h"
#include "net/roce_header.h"
#include "net/roce_opcode.h"

namespace {

using namespace sv::net;

// A UDP socket bound to one source address, and the addresses the ICRC covers.
struct Sender {
  int fd = -1;
  DatagramAddrs addrs;
  sockaddr_in dst{};

  bool open(const char* src_ip, const char* dst_ip) {
    fd = socket(AF_INET, SOCK_DGRAM, 0);
    int pmtu = IP_PMTUDISC_DO;  // DF set, IP ID 0: what the ICRC is computed for
    setsockopt(fd, IPPROTO_IP, IP_MTU_DISCOVER, &pmtu, sizeof pmtu);
    sockaddr_in src{};
    src.sin_family = dst.sin_family = AF_INET;
    if (inet_pton(AF_INET, src_ip, &src.sin_addr) != 1 || inet_pton(AF_INET, dst_ip, &dst.sin_addr) != 1) return false;
    dst.sin_port = htons(kRoceUdpPort);
    if (bind(fd, reinterpret_cast<sockaddr*>(&src), sizeof src) != 0) return perror("bind"), false;
    socklen_t len = sizeof src;
    getsockname(fd, reinterpret_cast<sockaddr*>(&src), &len);
    addrs.src_ip = v4_mapped(src.sin_addr.s_addr);
    addrs.dst_ip = v4_mapped(dst.sin_addr.s_addr);
    addrs.src_port = ntohs(src.sin_port);
    addrs.dst_port = kRoceUdpPort;
    return true;
  }
};

// The link as an attacker on the path sees it: the last PSN each side of
// the connection sent a request with (the server is at SERVER_IP).
class Watcher {
 public:
  // Our own packets come from UDP ports `ours`, the client's from others.
  bool open(const char* server_ip, uint16_t ours0, uint16_t ours1) {
    ours_[0] = ours0;
    ours_[1] = ours1;
    fd_ = socket(AF_PACKET, SOCK_RAW | SOCK_NONBLOCK, htons(ETH_P_IP));
    return fd_ >= 0 && inet_pton(AF_INET, server_ip, &server_) == 1;
  }
  // Reads what the link carried since the last call.
  void catch_up() {
    uint8_t frame[2048];
    for (int i = 0; i < 4096 && fd_ >= 0; ++i) {
      const ssize_t n = recv(fd_, frame, sizeof frame, 0);
      if (n <= 0) return;
      see(frame, static_cast<size_t>(n));
    }
  }
  bool server_seen = false, client_seen = false;
  uint32_t server_psn = 0, client_psn = 0;

 private:
  void see(const uint8_t* f, size_t n) {
    constexpr size_t kIp = kEthHeaderBytes, kUdp = kIp + kIpv4HeaderBytes, kBth = kUdp + kUdpHeaderBytes;
    if (n < kBth + kBthBytes + kIcrcBytes || be::get16(f + 12) != ETH_P_IP || f[kIp] != 0x45 || f[kIp + 9] != 17 ||
        be::get16(f + kUdp + 2) != kRoceUdpPort)
      return;
    RocePacket p;
    const size_t udp_len = be::get16(f + kUdp + 4);
    if (udp_len < kUdpHeaderBytes + kBthBytes + kIcrcBytes || kUdp + udp_len > n ||
        !decode(f + kBth, udp_len - kUdpHeaderBytes - kIcrcBytes, &p))
      return;
    const OpcodeInfo* op = opcode_info(p.bth.opcode);
    if (op->transport() != kTransportRc || !op->is(kRequest)) return;
    if (std::memcmp(f + kIp + 12, &server_, 4) == 0) {
      server_psn = p.bth.psn;
      server_seen = true;
    } else if (std::memcmp(f + kIp + 16, &server_, 4) == 0 && be::get16(f + kUdp) != ours_[0] &&
               be::get16(f + kUdp) != ours_[1]) {
      client_psn = p.bth.psn;
      client_seen = true;
    }
  }
  int fd_ = -1;
  in_addr server_{};
  uint16_t ours_[2] = {};
};

constexpr size_t kMaxDatagram = 1400;  // fits the veth's 1500 bytes with IP and UDP

class Fuzzer {
 public:
  Fuzzer(Sender& peer, Sender& stranger, Watcher& watcher, uint32_t qpn, uint32_t send_psn, uint32_t recv_psn,
         uint32_t iters, uint32_t seed)
      : peer_(peer),
        stranger_(stranger),
        watcher_(watcher),
        qpn_(qpn),
        send_psn_(send_psn),
        recv_psn_(recv_psn),
        iters_(iters),
        rng_(seed) {}

  // One datagram of each class, by number (see kClasses).
  void one(size_t cls);

  int sent = 0, failed = 0;

  // The classes (kClasses).
  void random_datagram();
  void truncated_header();
  void bad_icrc();
  void psn_jump();
  void ack_nak();
  void read_response();
  void read_request();
  void atomic();
  void every_opcode();
  void gsi_mad();
  void random_qpn();
  void stranger();

 private:
  // The datagram being built, at buf_ + kDatagramHeadroom.
  uint8_t* at() { return buf_.data() + kDatagramHeadroom; }
  void send(Sender& s, size_t len) {
    if (sendto(s.fd, at(), len, 0, reinterpret_cast<const sockaddr*>(&s.dst), sizeof s.dst) ==
        static_cast<ssize_t>(len))
      ++sent;
    else
      ++failed;
    pace();
  }
  // `pkt` with `len` random payload bytes, sealed (valid ICRC); its length.
  size_t build(const RocePacket& pkt, size_t len) {
    std::vector<uint8_t> payload = random_bytes(len);
    return build_datagram(peer_.addrs, pkt, payload.data(), len, buf_.data());
  }
  std::vector<uint8_t> random_bytes(size_t n) {
    std::vector<uint8_t> v(n);
    for (auto& b : v) b = static_cast<uint8_t>(u32());
    return v;
  }
  uint32_t u32() { return static_cast<uint32_t>(rng_()); }
  uint32_t below(uint32_t n) { return n ? u32() % n : 0; }
  uint64_t u64() {
    const uint64_t high = u32();  // (two calls in one expression: either could go first)
    return high << 32 | u32();
  }
  // A PSN the live connection does not use in either direction during the
  // run (some margin around both windows).
  uint32_t unused_psn() {
    for (;;) {
      const uint32_t psn = u32() & kMask24;
      if (psn_sub(psn, recv_psn_ - 64) > iters_ + 128 && psn_sub(psn, send_psn_ - 64) > iters_ + 128) return psn;
    }
  }
  const OpcodeInfo& random_opcode() {
    auto table = opcode_table();
    return table[below(static_cast<uint32_t>(table.size()))];
  }
  RocePacket request(uint8_t opcode, uint32_t psn) {
    RocePacket p;
    p.bth.opcode = opcode;
    p.bth.dest_qp = qpn_;
    p.bth.psn = psn;
    p.bth.ack_req = u32() & 1;
    p.bth.se = u32() & 1;
    p.reth = {u64(), u32(), u32()};
    p.atomic_eth = {u64(), u32(), u64(), u64()};
    p.deth = {u32(), u32() & kMask24};
    p.aeth = {static_cast<uint8_t>(u32()), u32() & kMask24};
    p.atomic_ack = u64();
    p.imm = u32();
    p.ieth = u32();
    p.xrceth.srqn = u32() & kMask24;
    return p;
  }
  size_t payload_len(const OpcodeInfo& op) {
    if (!op.is(kPayload)) return 0;
    return below(4) == 0 ? below(kMaxDatagram - op.header_bytes - 8) : below(64);
  }

  Sender& peer_;
  Sender& stranger_;
  Watcher& watcher_;
  const uint32_t qpn_, send_psn_, recv_psn_, iters_;
  std::mt19937 rng_;
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(kDatagramHeadroom + kMaxDatagram + kDatagramOverhead);
  // A steady 16 datagrams a millisecond, not a burst the server's socket
  // drops: by the clock, so that a loaded machine's late wake-ups do not
  // stretch the run (a sleep after every 16 took 4 s instead of 1.5 beside
  // another ctest, and outlasted the ping-pong). After a stall it catches
  // up on 8 ms at most: 128 datagrams, 180 KB at most, where the server's
  // socket holds 4 MiB.
  void pace() {
    if (++paced_ % 16) return;
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    const int64_t now_ns = int64_t{now.tv_sec} * 1'000'000'000 + now.tv_nsec;
    if (!next_ns_) next_ns_ = now_ns;
    next_ns_ = std::max(next_ns_ + 1'000'000, now_ns - 8'000'000);
    if (next_ns_ <= now_ns) return;
    const timespec until{static_cast<time_t>(next_ns_ / 1'000'000'000), static_cast<long>(next_ns_ % 1'000'000'000)};
    clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, nullptr);
  }
  int paced_ = 0;
  int64_t next_ns_ = 0;
  uint32_t truncate_at_ = 0, next_opcode_ = 0, next_syndrome_ = 0;
};

// Bytes, any length, half of them sealed with a valid ICRC.
void Fuzzer::random_datagram() {
  const size_t len = below(4) == 0 ? below(kBthBytes + kIcrcBytes + 8) : below(kMaxDatagram);
  std::vector<uint8_t> bytes = random_bytes(len);
  std::copy(bytes.begin(), bytes.end(), at());
  if ((u32() & 1)) put_datagram_icrc(peer_.addrs, buf_.data(), len);
  send(peer_, len);
}

// A request's headers cut short, every length from none to the whole
// headers, sealed whenever a BTH and an ICRC fit.
void Fuzzer::truncated_header() {
  const OpcodeInfo& op = random_opcode();
  const size_t whole = op.header_bytes + kIcrcBytes;
  const size_t len = truncate_at_++ % (whole + 1);
  RocePacket p = request(op.opcode, unused_psn());
  uint8_t headers[128];
  encode_headers(p, headers);
  std::copy(headers, headers + std::min(len, size_t{op.header_bytes}), at());
  put_datagram_icrc(peer_.addrs, buf_.data(), len);  // (the last 4 bytes become the ICRC)
  send(peer_, len);
}

// A well-formed packet with one bit flipped anywhere the ICRC covers (BTH
// byte 4, FECN/BECN, is masked out of it: a flip there is legal).
void Fuzzer::bad_icrc() {
  const OpcodeInfo& op = random_opcode();
  const size_t len = build(request(op.opcode, unused_psn()), payload_len(op));
  size_t byte;
  do byte = below(static_cast<uint32_t>(len));
  while (byte == 4);
  at()[byte] ^= static_cast<uint8_t>(1u << below(8));
  send(peer_, len);
}

// Requests of the right transport whose PSN jumps: just past the run's
// window, far in the future, half a circle away, or long past.
void Fuzzer::psn_jump() {
  const OpcodeInfo* op;
  do op = &random_opcode();
  while (op->transport() != kTransportRc || !op->is(kRequest));
  uint32_t psn;
  switch (below(4)) {
    case 0: psn = psn_add(recv_psn_, iters_ + 128 + below(1000)); break;
    case 1: psn = psn_add(recv_psn_, 1u << 23); break;
    case 2: psn = psn_add(recv_psn_, (1u << 23) - 1 - below(1000)); break;
    default: psn = psn_sub(recv_psn_, 128 + below(1u << 20)); break;
  }
  send(peer_, build(request(op->opcode, psn), payload_len(*op)));
}

// ACKNOWLEDGE (every syndrome, in turn) and atomic ACKs the server's
// requester never asked for.
void Fuzzer::ack_nak() {
  RocePacket p = request(below(2) ? kTransportRc | kAck : kTransportRc | kAtomicAck, unused_psn());
  p.aeth.syndrome = static_cast<uint8_t>(next_syndrome_++);
  send(peer_, build(p, 0));
}

// READ responses (first, middle, last, only) to no READ, any length.
void Fuzzer::read_response() {
  const uint8_t ops[] = {kReadResponseFirst, kReadResponseMiddle, kReadResponseLast, kReadResponseOnly};
  RocePacket p = request(kTransportRc | ops[below(4)], unused_psn());
  send(peer_, build(p, below(kMaxDatagram - 32)));
}

// READ requests: any PSN, any length, any rkey and address.
void Fuzzer::read_request() {
  RocePacket p = request(kTransportRc | kReadRequest, unused_psn());
  const uint32_t lens[] = {0, 1, 1024, 0x7fffffff, 0x80000000, 0xffffffff, u32()};
  p.reth.len = lens[below(7)];
  send(peer_, build(p, 0));
}

void Fuzzer::atomic() {
  RocePacket p = request(kTransportRc | (below(2) ? kCompareSwap : kFetchAdd), unused_psn());
  if (below(2)) p.atomic_eth.va &= ~uint64_t{7};  // aligned, as a real one is
  send(peer_, build(p, 0));
}

// Every opcode 0..255 in turn, known or not, of any transport, with any
// bytes after a BTH that names the server's QP.
void Fuzzer::every_opcode() {
  const uint8_t opcode = static_cast<uint8_t>(next_opcode_++);
  const OpcodeInfo* op = opcode_info(opcode);
  size_t len = kBthBytes + below(64);
  if (op && below(2)) len = op->header_bytes + payload_len(*op);
  std::vector<uint8_t> bytes = random_bytes(len);
  RocePacket p = request(opcode, unused_psn());
  p.bth.pad = static_cast<uint8_t>(below(4));
  p.bth.tver = below(8) == 0 ? static_cast<uint8_t>(below(16)) : 0;
  if (op) {
    uint8_t headers[128];
    encode_headers(p, headers);
    std::copy(headers, headers + std::min(len, size_t{op->header_bytes}), bytes.begin());
  } else {
    bytes[0] = opcode;
    bytes[1] = static_cast<uint8_t>(p.bth.pad << 4 | p.bth.tver);
    be::put16(&bytes[2], kDefaultPkey);
    be::put24(&bytes[5], qpn_);
    be::put24(&bytes[9], p.bth.psn);
  }
  std::copy(bytes.begin(), bytes.end(), at());
  put_datagram_icrc(peer_.addrs, buf_.data(), len + kIcrcBytes);
  send(peer_, len + kIcrcBytes);
}

// UD SENDs to QP1, the GSI: MADs with a CM header and garbage after it,
// CM messages with random fields (some naming an rdma_cm service with an
// IP header), any attribute ID, truncated, or with a wrong Q_Key.
void Fuzzer::gsi_mad() {
  using namespace sv::ibcm;
  RocePacket p = request(kTransportUd | kSendOnly, unused_psn());
  p.bth.dest_qp = kGsiQpn;
  p.deth.qkey = below(8) ? sv::ibcm::kGsiQkey : u32();
  std::vector<uint8_t> mad = random_bytes(kMadSize);
  switch (below(3)) {
    case 0: {  // a real message of each kind, fields random
      CmMessage m;
      m.transaction_id = u64();
      const uint8_t* r = mad.data();
      switch (below(5)) {
        case 0: {
          Req req;
          req.local_comm_id = u32();
          req.service_id = kIpServiceIdPrefix |
                           ip_service_id(below(2) ? PortSpace::kTcp : PortSpace::kUdp, static_cast<uint16_t>(u32()));
          std::copy(r, r + kReqPrivateDataSize, req.private_data.begin());
          req.private_data[0] = kCmaVersion;
          req.private_data[1] = static_cast<uint8_t>((below(2) ? 4 : 6) << 4);
          m.body = req;
          break;
        }
        case 1: {
          SidrReq s;
          s.request_id = u32();
          s.service_id = kIpServiceIdPrefix | ip_service_id(PortSpace::kUdp, static_cast<uint16_t>(u32()));
          std::copy(r, r + kSidrReqPrivateDataSize, s.private_data.begin());
          s.private_data[0] = kCmaVersion;
          s.private_data[1] = 0x40;
          m.body = s;
          break;
        }
        case 2: m.body = Dreq{u32(), u32(), u32() & kMask24, {}}; break;
        case 3: {
          Rej rej;
          rej.remote_comm_id = u32();
          rej.reason = static_cast<uint16_t>(u32());
          rej.reject_info_length = static_cast<uint8_t>(below(128));
          m.body = rej;
          break;
        }
        default: m.body = Rep{}; break;
      }
      encode(m, std::span<uint8_t, kMadSize>(mad.data(), kMadSize));
      break;
    }
    case 1: {  // a CM header, then anything; any attribute ID
      MadHeader h;
      h.transaction_id = u64();
      h.attribute_id = below(2) ? static_cast<uint16_t>(0x10 + below(10)) : static_cast<uint16_t>(u32());
      encode_mad_header(h, std::span<uint8_t, kMadHeaderSize>(mad.data(), kMadHeaderSize));
      break;
    }
    default:  // garbage throughout
      break;
  }
  size_t len = kMadSize;
  if (below(4) == 0)
    len = below(kMadSize);  // truncated
  else if (below(8) == 0)
    len = kMadSize + below(64);  // longer than a MAD
  mad.resize(len, 0);
  send(peer_, build_datagram(peer_.addrs, p, mad.data(), len, buf_.data()));
}

// Well-formed packets of any kind to QPNs that are not the server's.
void Fuzzer::random_qpn() {
  const OpcodeInfo& op = random_opcode();
  RocePacket p = request(op.opcode, unused_psn());
  do {
    p.bth.dest_qp = below(4) == 0 ? (qpn_ & ~0xffffu) | below(64)  // the server's process, another QP
                                  : u32() & kMask24;
  } while (p.bth.dest_qp == qpn_ || p.bth.dest_qp == 1);
  send(peer_, build(p, payload_len(op)));
}

// From an address on the peer's link that is not the peer's, with the PSNs
// the connection uses right now: NAKs of the server's latest request (the
// kinds that end a QP; now and then any syndrome), and SENDs with the PSN
// the server expects next. Only the address gives them away.
void Fuzzer::stranger() {
  watcher_.catch_up();
  RocePacket p;
  p.bth.dest_qp = qpn_;
  size_t len = 0;
  if (u32() & 1) {
    p.bth.opcode = kTransportRc | kAck;
    p.bth.psn = watcher_.server_seen ? watcher_.server_psn : psn_add(send_psn_, below(iters_));
    p.aeth = {static_cast<uint8_t>(0x60 | below(5)), u32() & kMask24};
    if (below(4) == 0) p.aeth.syndrome = static_cast<uint8_t>(u32());
  } else {
    p.bth.opcode = kTransportRc | kSendOnly;
    p.bth.psn = watcher_.client_seen ? psn_add(watcher_.client_psn, 1) : psn_add(recv_psn_, below(iters_));
    p.bth.ack_req = true;
    len = below(64);
  }
  std::vector<uint8_t> payload = random_bytes(len);
  send(stranger_, build_datagram(stranger_.addrs, p, payload.data(), len, buf_.data()));
}

struct Class {
  const char* name;
  void (Fuzzer::*fn)();
};
constexpr Class kClasses[] = {
    {"random", &Fuzzer::random_datagram},    {"truncated", &Fuzzer::truncated_header},
    {"bad_icrc", &Fuzzer::bad_icrc},         {"psn_jump", &Fuzzer::psn_jump},
    {"ack_nak", &Fuzzer::ack_nak},           {"read_response", &Fuzzer::read_response},
    {"read_request", &Fuzzer::read_request}, {"atomic", &Fuzzer::atomic},
    {"every_opcode", &Fuzzer::every_opcode}, {"gsi_mad", &Fuzzer::gsi_mad},
    {"random_qpn", &Fuzzer::random_qpn},     {"stranger", &Fuzzer::stranger},
};
constexpr size_t kClassCount = sizeof kClasses / sizeof kClasses[0];

void Fuzzer::one(size_t cls) {
  // (Through a pointer first: g++ 12's -fsanitize=bounds misreads the index
  // of `(this->*kClasses[cls].fn)()` at -O0 and reports it out of bounds.)
  const Class* k = &kClasses[cls];
  (this->*(k->fn))();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 10 && argc != 11) {
    std::fprintf(stderr, "usage: %s SRC_IP STRANGER_IP DST_IP QPN SEND_PSN RECV_PSN ITERS SEED COUNT [CLASS,...]\n",
                 argv[0]);
    return 2;
  }
  auto number = [&](int i) { return static_cast<uint32_t>(std::strtoul(argv[i], nullptr, 0)); };
  std::vector<uint8_t> classes;
  for (size_t c = 0; c < kClassCount; ++c)
    if (argc == 10 ||
        ("," + std::string(argv[10]) + ",").find("," + std::string(kClasses[c].name) + ",") != std::string::npos)
      classes.push_back(static_cast<uint8_t>(c));
  if (classes.empty()) return std::fprintf(stderr, "no such class: %s\n", argv[10]), 2;
  Sender peer, stranger;
  if (!peer.open(argv[1], argv[3]) || !stranger.open(argv[2], argv[3])) return 1;
  const uint32_t seed = number(8), count = number(9);
  std::printf("roce_fuzz: seed %u, %u datagrams of each of %zu classes to QPN %#x\n", seed, count, classes.size(),
              number(4));
  Watcher watcher;
  if (!watcher.open(argv[3], peer.addrs.src_port, stranger.addrs.src_port))
    std::printf("roce_fuzz: cannot watch the link (%s): the stranger guesses PSNs\n", strerror(errno));
  Fuzzer f(peer, stranger, watcher, number(4), number(5), number(6), number(7), seed);
  std::vector<uint8_t> order;
  for (uint8_t c : classes) order.insert(order.end(), count, c);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  for (uint8_t c : order) f.one(c);
  std::printf("roce_fuzz: sent %d datagrams, %d not sent\n", f.sent, f.failed);
  return f.failed == 0 ? 0 : 1;
}
