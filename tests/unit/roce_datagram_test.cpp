// RoCEv2 datagrams as UDP sockets carry them (net/roce_datagram.h): the
// ICRC built with the IP/UDP image a socket cannot show, and the receive
// check that must accept any IPv4 ID (rxe picks its own) and nothing corrupt.
#include "net/roce_datagram.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "net/icrc.h"
#include "net/roce_frame.h"
#include "net/udp_sport.h"

namespace sv::net {
namespace {

DatagramAddrs addrs(bool v4) {
  DatagramAddrs a;
  if (v4) {
    a.src_ip = v4_mapped(htonl(0x0A5D0001));
    a.dst_ip = v4_mapped(htonl(0x0A5D0002));
  } else {
    a.src_ip.s6_addr[0] = 0xfd;
    a.src_ip.s6_addr[15] = 1;
    a.dst_ip.s6_addr[0] = 0xfd;
    a.dst_ip.s6_addr[15] = 2;
  }
  a.src_port = 0xC123;
  a.dst_port = kRoceUdpPort;
  return a;
}

RocePacket send_only(uint32_t psn) {
  RocePacket p;
  p.bth.opcode = kTransportRc | kSendOnly;
  p.bth.dest_qp = 0x12345;
  p.bth.psn = psn;
  p.bth.ack_req = true;
  return p;
}

// The same packet as the whole frame the wire carries (build_frame, IP ID 0).
std::vector<uint8_t> as_frame(const DatagramAddrs& d, const RocePacket& p, const std::vector<uint8_t>& payload) {
  FrameAddrs f;
  f.src_ip = d.src_ip;
  f.dst_ip = d.dst_ip;
  f.udp_sport = d.src_port;
  f.udp_dport = d.dst_port;
  return build_frame(f, p, payload.data(), payload.size());
}

TEST(RoceDatagram, SameBytesAsTheWholeFrame) {
  for (bool v4 : {true, false}) {
    for (size_t len : {0, 1, 7, 256, 1021}) {
      std::vector<uint8_t> payload(len);
      for (size_t i = 0; i < len; ++i) payload[i] = static_cast<uint8_t>(i * 7 + 3);
      std::vector<uint8_t> buf(kDatagramHeadroom + kDatagramOverhead + len);
      DatagramAddrs a = addrs(v4);
      size_t n = build_datagram(a, send_only(77), payload.data(), len, buf.data());
      ASSERT_GT(n, 0u);
      std::vector<uint8_t> frame = as_frame(a, send_only(77), payload);
      ASSERT_GE(frame.size(), n);
      // The datagram is the frame's UDP payload, ICRC included.
      EXPECT_EQ(0, std::memcmp(frame.data() + frame.size() - n, buf.data() + kDatagramHeadroom, n))
          << "v4 " << v4 << " len " << len;
      EXPECT_TRUE(datagram_icrc_ok(a, buf.data(), n));
    }
  }
}

// Receiving from rxe: the sender's IP ID entered its ICRC but is not shown
// to a UDP socket. Every ID must pass.
TEST(RoceDatagram, AnyIpv4IdIsAccepted) {
  DatagramAddrs a = addrs(true);
  std::vector<uint8_t> payload(512, 0x5a);
  std::vector<uint8_t> frame = as_frame(a, send_only(5), payload);
  const size_t ip = kEthHeaderBytes, udp_payload = ip + kIpv4HeaderBytes + kUdpHeaderBytes;
  for (uint32_t id : {1u, 0x8000u, 0x1234u, 0xffffu}) {
    std::vector<uint8_t> f = frame;
    f[ip + 4] = static_cast<uint8_t>(id >> 8);
    f[ip + 5] = static_cast<uint8_t>(id);
    // The sender's ICRC covered its ID: recompute it as the sender did.
    ParsedFrame parsed;
    ASSERT_FALSE(parse_frame(f.data(), f.size(), &parsed));  // IP checksum now wrong: as expected
    size_t len = f.size() - udp_payload;
    std::vector<uint8_t> buf(kDatagramHeadroom + len);
    // Build the datagram whose ICRC matches ID `id`: the ICRC over the frame's IP packet.
    uint32_t crc = net::icrc(f.data() + ip, f.size() - ip - kIcrcBytes);
    std::memcpy(buf.data() + kDatagramHeadroom, f.data() + udp_payload, len);
    uint8_t* tail = buf.data() + kDatagramHeadroom + len - kIcrcBytes;
    for (int i = 0; i < 4; ++i) tail[i] = static_cast<uint8_t>(crc >> (8 * i));
    EXPECT_TRUE(datagram_icrc_ok(a, buf.data(), len)) << "IP ID " << id;
  }
}

// A GRO buffer holds segments back to back: the headroom of one is the end
// of the one before, which a receiver may still have to place. Checking the
// ICRC leaves every byte of the buffer as it was.
TEST(RoceDatagram, IcrcCheckWritesNothing) {
  for (bool v4 : {true, false}) {
    std::vector<uint8_t> payload(300, 0x5a);
    std::vector<uint8_t> buf(kDatagramHeadroom + kDatagramOverhead + payload.size());
    DatagramAddrs a = addrs(v4);
    size_t n = build_datagram(a, send_only(77), payload.data(), payload.size(), buf.data());
    ASSERT_GT(n, 0u);
    std::fill(buf.begin(), buf.begin() + kDatagramHeadroom, uint8_t{0xc3});  // "the packet before"
    const std::vector<uint8_t> before = buf;
    EXPECT_TRUE(datagram_icrc_ok(a, buf.data(), n)) << "v4 " << v4;
    EXPECT_EQ(buf, before) << "v4 " << v4;
  }
}

// A GSO segment of `frame` (an IPv4 RoCEv2 frame sent with ID 0) that left
// with IP ID `id`: its datagram with the ICRC patched by set_icrc_ip_id,
// and the ICRC a receiver computes over the real header (*expected).
std::vector<uint8_t> segment_with_id(const std::vector<uint8_t>& frame, uint32_t id, uint32_t* expected) {
  const size_t ip = kEthHeaderBytes, udp_payload = ip + kIpv4HeaderBytes + kUdpHeaderBytes;
  std::vector<uint8_t> f = frame;
  f[ip + 4] = static_cast<uint8_t>(id >> 8);
  f[ip + 5] = static_cast<uint8_t>(id);
  *expected = net::icrc(f.data() + ip, f.size() - ip - kIcrcBytes);
  std::vector<uint8_t> datagram(frame.begin() + static_cast<long>(udp_payload), frame.end());
  set_icrc_ip_id(datagram.data(), datagram.size(), static_cast<uint16_t>(id));
  return datagram;
}

uint32_t icrc_of(const std::vector<uint8_t>& datagram) {
  const uint8_t* tail = datagram.data() + datagram.size() - kIcrcBytes;
  return uint32_t{tail[0]} | uint32_t{tail[1]} << 8 | uint32_t{tail[2]} << 16 | uint32_t{tail[3]} << 24;
}

TEST(RoceDatagram, IcrcFollowsTheIpIdGsoGives) {
  // The k-th segment of a UDP GSO send leaves with IP ID k: its ICRC, patched
  // from the ID-0 one, must be what a receiver computes over the real header.
  DatagramAddrs a = addrs(true);
  for (size_t size : {0u, 1u, 1024u, 4096u}) {
    std::vector<uint8_t> frame = as_frame(a, send_only(9), std::vector<uint8_t>(size, 0x3c));
    for (uint32_t id : {1u, 2u, 63u, 0x1234u, 0xffffu}) {
      uint32_t expected;
      EXPECT_EQ(icrc_of(segment_with_id(frame, id, &expected)), expected) << "payload " << size << ", IP ID " << id;
    }
  }
}

// The ID deltas are kept for a few packet sizes per thread: sizes that
// come in turn (more of them than are kept, so entries are taken over and
// made again) each give the ICRC of the real header, every time.
TEST(RoceDatagram, IcrcFollowsTheIpIdAcrossManySizesInTurn) {
  DatagramAddrs a = addrs(true);
  for (int round = 0; round < 3; ++round)
    for (size_t size : {0u, 4u, 8u, 100u, 256u, 1000u, 1024u, 2000u, 3000u, 4096u, 12u}) {
      std::vector<uint8_t> frame = as_frame(a, send_only(9), std::vector<uint8_t>(size, 0x6b));
      uint32_t expected;
      const std::vector<uint8_t> datagram = segment_with_id(frame, 1 + (size + round) % 64, &expected);
      EXPECT_EQ(icrc_of(datagram), expected) << "round " << round << ", payload " << size;
      // And a receiver takes it, with whichever ID it left with.
      std::vector<uint8_t> buf(kDatagramHeadroom + datagram.size());
      std::memcpy(buf.data() + kDatagramHeadroom, datagram.data(), datagram.size());
      EXPECT_TRUE(datagram_icrc_ok(a, buf.data(), datagram.size())) << "round " << round << ", payload " << size;
      buf[kDatagramHeadroom + datagram.size() / 2] ^= 0x01;
      EXPECT_FALSE(datagram_icrc_ok(a, buf.data(), datagram.size())) << "round " << round << ", payload " << size;
    }
}

TEST(RoceDatagram, CorruptionIsCaught) {
  for (bool v4 : {true, false}) {
    DatagramAddrs a = addrs(v4);
    std::vector<uint8_t> payload(300, 0x11);
    std::vector<uint8_t> buf(kDatagramHeadroom + kDatagramOverhead + payload.size());
    size_t n = build_datagram(a, send_only(9), payload.data(), payload.size(), buf.data());
    int caught = 0, tries = 0;
    for (size_t byte = 0; byte < n; byte += 5) {
      if (byte == 4) continue;  // BTH byte 4 (FECN/BECN/reserved) is not covered
      std::vector<uint8_t> b = buf;
      b[kDatagramHeadroom + byte] ^= 0x10;
      ++tries;
      caught += !datagram_icrc_ok(a, b.data(), n);
    }
    EXPECT_EQ(caught, tries) << "v4 " << v4;
    // Wrong addresses or ports: not the packet the sender protected.
    DatagramAddrs other = a;
    other.src_port ^= 1;
    EXPECT_FALSE(datagram_icrc_ok(other, buf.data(), n));
  }
}

}  // namespace
}  // namespace sv::net
