// The host service's rules (src/hostd): the budget of connections one user
// may hold, the CM claims table, and where a datagram goes, which the
// service and the transport share; and the pieces of util/ they talk
// through: descriptors passed with a message, the port attestation table.
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "hostd/claim_table.h"
#include "hostd/connection_budget.h"
#include "hostd/datagram_route.h"
#include "net/roce_header.h"
#include "util/fd_passing.h"
#include "util/port_attestation.h"

namespace sv::hostd {
namespace {

TEST(ConnectionBudget, OneUserAloneGetsHalfAndNoMore) {
  ConnectionBudget b(1000);
  int taken = 0;
  while (b.admit(1000)) ++taken;
  EXPECT_EQ(taken, 500);
  EXPECT_EQ(b.held_by(1000), 500u);
  // The other half stays for everyone else.
  EXPECT_TRUE(b.admit(0));
  EXPECT_TRUE(b.admit(1001));
}

TEST(ConnectionBudget, AnEqualShareWhenSeveralUsersAreConnected) {
  ConnectionBudget b(90);
  EXPECT_TRUE(b.admit(1));
  EXPECT_TRUE(b.admit(2));
  // Three users (the third counted as it asks): 30 each.
  int third = 0;
  while (b.admit(3)) ++third;
  EXPECT_EQ(third, 30);
  EXPECT_EQ(b.share_of(3), 30u);
}

TEST(ConnectionBudget, TheWholeIsBounded) {
  ConnectionBudget b(10);
  int taken = 0;
  for (uint32_t uid = 0; uid < 100; ++uid) taken += b.admit(uid);
  EXPECT_EQ(taken, 10);
  EXPECT_FALSE(b.admit(5000));
  b.leave(3);
  EXPECT_TRUE(b.admit(5000));
}

TEST(ConnectionBudget, LeavingGivesTheShareBack) {
  ConnectionBudget b(4);
  EXPECT_TRUE(b.admit(7));
  EXPECT_TRUE(b.admit(7));
  EXPECT_FALSE(b.admit(7));
  b.leave(7);
  EXPECT_TRUE(b.admit(7));
  b.leave(8);  // a uid it never admitted: nothing changes
  EXPECT_EQ(b.total(), 2u);
}

TEST(ClaimTable, AKeyHasOneHolder) {
  ClaimTable t;
  uint32_t holder = 0;
  EXPECT_EQ(t.claim(10, 1000, "gsi-tcp-10.0.0.1:7471"), ClaimTable::Result::kGranted);
  EXPECT_EQ(t.claim(10, 1000, "gsi-tcp-10.0.0.1:7471"), ClaimTable::Result::kGranted);  // its own, again
  EXPECT_EQ(t.claim(11, 0, "gsi-tcp-10.0.0.1:7471", &holder), ClaimTable::Result::kHeld);
  EXPECT_EQ(holder, 1000u);
  EXPECT_EQ(t.owner_of("gsi-tcp-10.0.0.1:7471"), 10);
  EXPECT_EQ(t.owner_of("gsi-tcp-10.0.0.1:7472"), -1);
}

TEST(ClaimTable, OnlyTheHolderReleases) {
  ClaimTable t;
  t.claim(10, 1000, "k");
  t.release(11, "k");
  EXPECT_EQ(t.owner_of("k"), 10);
  t.release(10, "k");
  EXPECT_EQ(t.owner_of("k"), -1);
  EXPECT_EQ(t.count_of(10), 0u);
  EXPECT_EQ(t.count_of_uid(1000), 0u);
}

TEST(ClaimTable, DroppingAConnectionLetsAllItsClaimsGo) {
  ClaimTable t;
  for (int i = 0; i < 100; ++i) t.claim(10, 1000, "a" + std::to_string(i));
  t.claim(11, 1000, "b");
  EXPECT_EQ(t.count_of_uid(1000), 101u);
  t.drop(10);
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.count_of(10), 0u);
  EXPECT_EQ(t.count_of_uid(1000), 1u);
  EXPECT_EQ(t.owner_of("b"), 11);
  EXPECT_EQ(t.claim(12, 0, "a5"), ClaimTable::Result::kGranted);
}

TEST(ClaimTable, LimitsPerConnectionPerUserAndInAll) {
  ClaimTable t(ClaimTable::Limits{3, 5, 7});
  for (int i = 0; i < 3; ++i) EXPECT_EQ(t.claim(1, 100, "c1-" + std::to_string(i)), ClaimTable::Result::kGranted);
  EXPECT_EQ(t.claim(1, 100, "c1-x"), ClaimTable::Result::kOverLimit);  // the connection's
  EXPECT_EQ(t.claim(2, 100, "c2-0"), ClaimTable::Result::kGranted);
  EXPECT_EQ(t.claim(2, 100, "c2-1"), ClaimTable::Result::kGranted);
  EXPECT_EQ(t.claim(3, 100, "c3-0"), ClaimTable::Result::kOverLimit);  // the user's
  EXPECT_EQ(t.claim(4, 200, "d-0"), ClaimTable::Result::kGranted);
  EXPECT_EQ(t.claim(4, 200, "d-1"), ClaimTable::Result::kGranted);
  EXPECT_EQ(t.claim(5, 300, "e-0"), ClaimTable::Result::kOverLimit);  // the whole table's
  EXPECT_EQ(t.size(), 7u);
  t.drop(1);
  EXPECT_EQ(t.claim(3, 100, "c3-0"), ClaimTable::Result::kGranted);
}

// A datagram from its BTH on: DestQP `qpn`, `len` bytes in all.
std::vector<uint8_t> datagram(uint32_t qpn, size_t len = 64) {
  std::vector<uint8_t> d(len);
  d[5] = static_cast<uint8_t>(qpn >> 16);
  d[6] = static_cast<uint8_t>(qpn >> 8);
  d[7] = static_cast<uint8_t>(qpn);
  return d;
}

TEST(DatagramRoute, ByTheSlotInDestQp) {
  const auto d = datagram(0x030012);
  const Route r = route_of(d.data(), d.size());
  EXPECT_EQ(r.to, Destination::kProcess);
  EXPECT_EQ(r.slot, 3u);
  EXPECT_EQ(route_of(datagram(1).data(), 64).to, Destination::kCm);
  EXPECT_EQ(route_of(datagram(0xffffff).data(), 64).to, Destination::kMulticast);
  EXPECT_EQ(route_of(datagram(0x000005).data(), 64).to, Destination::kMalformed);  // slot 0 is no process's
  EXPECT_EQ(route_of(d.data(), net::kBthBytes + net::kIcrcBytes - 1).to, Destination::kMalformed);
}

// A GRO buffer of `seg`-byte datagrams for `qpns`, the last `last` bytes long.
std::vector<uint8_t> gro_buffer(const std::vector<uint32_t>& qpns, uint16_t seg, size_t last) {
  std::vector<uint8_t> b;
  for (size_t i = 0; i < qpns.size(); ++i) {
    const auto d = datagram(qpns[i], i + 1 == qpns.size() ? last : seg);
    b.insert(b.end(), d.begin(), d.end());
  }
  return b;
}

TEST(DatagramRoute, AWholeBufferOnlyWhenEveryDatagramIsForOneProcess) {
  auto b = gro_buffer({0x040001, 0x040002, 0x04ffff}, 1024, 100);
  EXPECT_EQ(whole_buffer_slot(b.data(), b.size(), 1024), 4u);
  b = gro_buffer({0x040001, 0x050001}, 1024, 1024);
  EXPECT_EQ(whole_buffer_slot(b.data(), b.size(), 1024), 0u);
  b = gro_buffer({0x040001, 1}, 1024, 1024);  // a CM MAD among them
  EXPECT_EQ(whole_buffer_slot(b.data(), b.size(), 1024), 0u);
  b = gro_buffer({0x040001, 0x040001}, 1024, 8);  // a last one too short to be RoCEv2
  EXPECT_EQ(whole_buffer_slot(b.data(), b.size(), 1024), 0u);
  b = gro_buffer({0x040001}, 1024, 1024);  // one datagram: not a buffer to hand on whole
  EXPECT_EQ(whole_buffer_slot(b.data(), b.size(), 1024), 0u);
  EXPECT_EQ(whole_buffer_slot(b.data(), b.size(), 0), 0u);
}

}  // namespace
}  // namespace sv::hostd

namespace sv {
namespace {

TEST(FdPassing, DescriptorsTravelWithTheMessage) {
  int sp[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const char hello[] = "hello";
  ASSERT_TRUE(send_with_fds(sp[0], hello, sizeof hello, pipe_fds, 2));
  char buf[16] = {};
  int got[kMaxPassedFds];
  int count = 0;
  ASSERT_EQ(receive_with_fds(sp[1], buf, sizeof buf, got, kMaxPassedFds, &count), static_cast<ssize_t>(sizeof hello));
  EXPECT_STREQ(buf, "hello");
  ASSERT_EQ(count, 2);
  // The received write end writes into the original read end.
  ASSERT_EQ(write(got[1], "x", 1), 1);
  char c = 0;
  EXPECT_EQ(read(pipe_fds[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  for (int fd : {sp[0], sp[1], pipe_fds[0], pipe_fds[1], got[0], got[1]}) close(fd);
}

TEST(FdPassing, ATruncatedMessageBringsNoDescriptors) {
  int sp[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sp), 0);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  char big[64] = {};
  ASSERT_TRUE(send_with_fds(sp[0], big, sizeof big, pipe_fds, 1));
  char small[8];
  int got[kMaxPassedFds];
  int count = -1;
  EXPECT_EQ(receive_with_fds(sp[1], small, sizeof small, got, kMaxPassedFds, &count), -1);
  EXPECT_EQ(errno, EMSGSIZE);
  EXPECT_EQ(count, 0);
  // (The passed read end was closed on our side: only ours remains, so
  // closing the write end gives its reader end of file at once.)
  close(pipe_fds[1]);
  char c;
  EXPECT_EQ(read(pipe_fds[0], &c, 1), 0);
  for (int fd : {sp[0], sp[1], pipe_fds[0]}) close(fd);
}

TEST(PortAttestation, ByFamilyAndPort) {
  auto* t = new PortAttestationTable{};
  in6_addr v4{}, v6{};
  v4.s6_addr[10] = v4.s6_addr[11] = 0xff;
  v4.s6_addr[12] = 10, v4.s6_addr[15] = 1;
  v6.s6_addr[0] = 0xfd, v6.s6_addr[15] = 1;
  t->slot[0][40000].store(7);
  EXPECT_EQ(attested_slot(t, v4, 40000), 7u);
  EXPECT_EQ(attested_slot(t, v6, 40000), 0u);  // another family's port of that number
  EXPECT_EQ(attested_slot(t, v4, 40001), 0u);
  EXPECT_EQ(attested_slot(nullptr, v4, 40000), 0u);
  delete t;
}

}  // namespace
}  // namespace sv
