// What flow steering (transport/roce_steering.h) relies on the kernel for,
// checked on the kernel itself: of the sockets sharing UDP port 4791, one
// connected to a flow's source gets all of that flow's datagrams, and the
// shared sockets still get every other flow. Each test runs in a child in a
// network namespace of its own (root; skipped without), so other processes
// on port 4791 do not take part.
#include <gtest/gtest.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>

#include "net/roce_frame.h"
#include "net/udp_sport.h"
#include "transport/roce_socket.h"
#include "transport/roce_steering.h"

namespace sv::roce {
namespace {

constexpr int kSkip = 77;

// Runs `body` in a child in a new network namespace with loopback up: its
// exit status (0: passed; kSkip: no namespace could be had).
int in_own_netns(const std::function<int()>& body) {
  pid_t pid = fork();
  if (pid == 0) {
    if (unshare(CLONE_NEWNET) != 0) _exit(kSkip);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    ifreq ifr{};
    std::strcpy(ifr.ifr_name, "lo");
    if (fd < 0 || ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) _exit(kSkip);
    ifr.ifr_flags |= IFF_UP;
    if (ioctl(fd, SIOCSIFFLAGS, &ifr) != 0) _exit(kSkip);
    close(fd);
    _exit(body());
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

const in6_addr kLoopback = net::v4_mapped(htonl(INADDR_LOOPBACK));

// A UDP socket on 127.0.0.1 (an ephemeral port): a peer's process.
int peer_socket(uint16_t* port) {
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    return -1;
  *port = ntohs(a.sin_port);
  return fd;
}

void send_to_roce_port(int fd, int count) {
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(net::kRoceUdpPort);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const char byte = 'x';
  for (int i = 0; i < count; ++i) sendto(fd, &byte, 1, 0, reinterpret_cast<sockaddr*>(&to), sizeof to);
}

// How many datagrams wait on `fd` (read and dropped).
int drain_count(int fd) {
  int n = 0;
  char buf[64];
  while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) >= 0) ++n;
  return n;
}

#define CHILD_EXPECT(cond)                                                  \
  do {                                                                      \
    if (!(cond)) {                                                          \
      std::fprintf(stderr, "%s:%d: failed: %s\n", __FILE__, __LINE__, #cond); \
      return 1;                                                             \
    }                                                                       \
  } while (0)

TEST(RoceSteering, ConnectedSocketTakesItsFlowAndNoOther) {
  const int rc = in_own_netns([] {
    // Two of our processes' shared sockets on 4791.
    RoceSocket a, b;
    CHILD_EXPECT(a.open() && a.owns_roce_port());
    CHILD_EXPECT(b.open() && b.owns_roce_port());
    uint16_t port1 = 0, port2 = 0;
    const int peer1 = peer_socket(&port1), peer2 = peer_socket(&port2);
    CHILD_EXPECT(peer1 >= 0 && peer2 >= 0);
    // Before: the kernel gives peer 1's flow to one of the shared sockets.
    send_to_roce_port(peer1, 10);
    CHILD_EXPECT(drain_count(a.fd4()) + drain_count(b.fd4()) == 10);

    SteeredFlows flows;
    DatagramInfo info;
    info.src = kLoopback;
    info.src_port = port1;
    info.dst = kLoopback;
    CHILD_EXPECT(flows.steer(info));
    CHILD_EXPECT(!flows.steer(info));  // known: one socket per flow
    CHILD_EXPECT(flows.count() == 1);
    // After: all of peer 1's datagrams come to the connected socket...
    send_to_roce_port(peer1, 10);
    CHILD_EXPECT(drain_count(flows.fd(0)) == 10);
    CHILD_EXPECT(drain_count(a.fd4()) + drain_count(b.fd4()) == 0);
    // ...and peer 2's still to the shared ones.
    send_to_roce_port(peer2, 10);
    CHILD_EXPECT(drain_count(flows.fd(0)) == 0);
    CHILD_EXPECT(drain_count(a.fd4()) + drain_count(b.fd4()) == 10);
    // Gone (a fork()ed child closes its copies): the shared sockets again.
    flows.close();
    send_to_roce_port(peer1, 10);
    CHILD_EXPECT(drain_count(a.fd4()) + drain_count(b.fd4()) == 10);
    return 0;
  });
  if (rc == kSkip) GTEST_SKIP() << "no network namespace of our own (not root?)";
  EXPECT_EQ(rc, 0);
}

TEST(RoceSteering, OurSendsLeaveFromAPortOfTheirOwn) {
  const int rc = in_own_netns([] {
    RoceSocket a, b;
    CHILD_EXPECT(a.open() && b.open());
    CHILD_EXPECT(a.receive_port(true) == net::kRoceUdpPort);
    // Each process's flows are its own: a peer can tell them apart.
    CHILD_EXPECT(a.source_port(kLoopback) != net::kRoceUdpPort);
    CHILD_EXPECT(a.source_port(kLoopback) != b.source_port(kLoopback));
    uint16_t port = 0;
    const int peer = peer_socket(&port);
    const char byte = 'x';
    CHILD_EXPECT(a.send(kLoopback, kLoopback, port, 0, reinterpret_cast<const uint8_t*>(&byte), 1));
    sockaddr_in from{};
    socklen_t len = sizeof from;
    char buf[8];
    CHILD_EXPECT(recvfrom(peer, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len) == 1);
    CHILD_EXPECT(ntohs(from.sin_port) == a.source_port(kLoopback));
    return 0;
  });
  if (rc == kSkip) GTEST_SKIP() << "no network namespace of our own (not root?)";
  EXPECT_EQ(rc, 0);
}

TEST(RoceSteering, SendsToEachPeerProcessLeaveByAPortOfTheirOwn) {
  const int rc = in_own_netns([] {
    RoceSocket a;
    CHILD_EXPECT(a.open());
    // A lane per process of the peer host (the slot its DestQP carries):
    // two of that host's processes never share a flow from us, so each
    // can have its own brought to itself.
    const uint16_t own = a.source_port(kLoopback), to3 = a.lane_port(kLoopback, 3), to4 = a.lane_port(kLoopback, 4);
    CHILD_EXPECT(to3 != own && to4 != own && to3 != to4);
    CHILD_EXPECT(a.lane_port(kLoopback, 3) == to3);  // (opened once)
    CHILD_EXPECT(a.lane_port(kLoopback, 0) == own);
    uint16_t port = 0;
    const int peer = peer_socket(&port);
    uint8_t bufs[4][64] = {};
    const uint8_t lanes[4] = {3, 3, 4, 0};
    OutDatagram d[4];
    for (int i = 0; i < 4; ++i) {
      bufs[i][5] = lanes[i];  // (DestQP's slot byte, as the engine's datagrams carry it)
      d[i] = OutDatagram{kLoopback, kLoopback, port, 0, bufs[i], sizeof bufs[i], false, lanes[i]};
    }
    a.send_many(d, 4);  // (the two of lane 3: one GSO send)
    const uint16_t expected[4] = {to3, to3, to4, own};
    for (int i = 0; i < 4; ++i) {
      sockaddr_in from{};
      socklen_t len = sizeof from;
      uint8_t buf[128];
      CHILD_EXPECT(recvfrom(peer, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len) == 64);
      CHILD_EXPECT(ntohs(from.sin_port) == expected[i]);
    }
    return 0;
  });
  if (rc == kSkip) GTEST_SKIP() << "no network namespace of our own (not root?)";
  EXPECT_EQ(rc, 0);
}

TEST(RoceSteering, RefusedWhenThePortIsNotSharedWithUs) {
  const int rc = in_own_netns([] {
    RoceSocket service;  // the host service holds 4791 alone
    CHILD_EXPECT(service.open_exclusive());
    SteeredFlows flows;
    DatagramInfo info;
    info.src = kLoopback;
    info.src_port = 5000;
    info.dst = kLoopback;
    CHILD_EXPECT(!flows.steer(info));
    info.src_port = 5001;
    CHILD_EXPECT(!flows.steer(info));  // not tried again for the next flow
    CHILD_EXPECT(flows.count() == 0);
    return 0;
  });
  if (rc == kSkip) GTEST_SKIP() << "no network namespace of our own (not root?)";
  EXPECT_EQ(rc, 0);
}

}  // namespace
}  // namespace sv::roce
