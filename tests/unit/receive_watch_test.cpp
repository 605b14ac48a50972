// The receive watch (transport/receive_watch.h): an io_uring poll on an
// epoll set of descriptors, read without a system call. What it must never
// do is say "nothing came" while a watched socket holds a datagram.
#include "transport/receive_watch.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace sv::roce {
namespace {

// A UDP socket on loopback, and a way to send it a datagram.
struct LoopbackSocket {
  int fd = -1;
  sockaddr_in addr{};
  LoopbackSocket() {
    fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  }
  ~LoopbackSocket() { close_it(); }
  void close_it() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
  void send_one() const {
    const int out = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sendto(out, "x", 1, 0, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
    close(out);
  }
  bool take_one() const {
    char b[16];
    return recv(fd, b, sizeof b, MSG_DONTWAIT) > 0;
  }
};

class ReceiveWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!watch.open()) GTEST_SKIP() << "no io_uring here";
  }
  // Looks as the transport does: when told to, "polls" (the test knows
  // what it sent) and reports what the drain found. Returns the watch's word.
  bool look(const pollfd* fds, size_t count, uint64_t epoch = 0) {
    const bool said = watch.maybe_readable(fds, count, epoch);
    if (said) watch.drained(false);
    return said;
  }
  // Looks until the watch settles on "nothing" (at most a few looks: the
  // completion of a wake already handled costs one more).
  bool settles(const pollfd* fds, size_t count, uint64_t epoch = 0) {
    for (int i = 0; i < 8; ++i)
      if (!look(fds, count, epoch)) return true;
    return false;
  }
  ReceiveWatch watch;
};

TEST_F(ReceiveWatchTest, ADatagramIsSeenAndNothingElseIs) {
  LoopbackSocket s;
  pollfd fds[1] = {{s.fd, POLLIN, 0}};
  EXPECT_TRUE(look(fds, 1)) << "a new set is looked at";
  ASSERT_TRUE(settles(fds, 1));
  for (int i = 0; i < 1000; ++i) ASSERT_FALSE(look(fds, 1)) << "nothing came, look " << i;
  for (int round = 0; round < 20; ++round) {
    s.send_one();
    EXPECT_TRUE(watch.maybe_readable(fds, 1, 0)) << "round " << round;
    EXPECT_TRUE(s.take_one());
    watch.drained(true);
    ASSERT_TRUE(settles(fds, 1)) << "round " << round;
  }
  EXPECT_EQ(watch.arms(), 1u) << "one arm: the multishot poll stays";
}

TEST_F(ReceiveWatchTest, ADatagramAnotherThreadSendsIsSeenWhileWeOnlyLook) {
  // The sender's wake raises the ring's flag; this thread, which never
  // enters the kernel while it looks, sees it.
  LoopbackSocket s;
  pollfd fds[1] = {{s.fd, POLLIN, 0}};
  look(fds, 1);
  ASSERT_TRUE(settles(fds, 1));
  std::thread sender([&] { s.send_one(); });
  sender.join();
  bool seen = false;
  for (int i = 0; i < 1'000'000 && !seen; ++i) seen = watch.maybe_readable(fds, 1, 0);
  EXPECT_TRUE(seen);
  EXPECT_TRUE(s.take_one());
}

TEST_F(ReceiveWatchTest, ASocketAddedLaterIsWatched) {
  LoopbackSocket a, b;
  pollfd one[1] = {{a.fd, POLLIN, 0}};
  look(one, 1);
  ASSERT_TRUE(settles(one, 1));
  pollfd two[2] = {{a.fd, POLLIN, 0}, {b.fd, POLLIN, 0}};
  EXPECT_TRUE(look(two, 2)) << "a changed set is looked at";
  ASSERT_TRUE(settles(two, 2));
  b.send_one();
  EXPECT_TRUE(watch.maybe_readable(two, 2, 0));
  EXPECT_TRUE(b.take_one());
}

TEST_F(ReceiveWatchTest, ANewSocketWithAClosedOnesNumberIsWatchedOnceTheEpochMoves) {
  auto first = std::make_unique<LoopbackSocket>();
  const int number = first->fd;
  pollfd fds[1] = {{number, POLLIN, 0}};
  look(fds, 1, 1);
  ASSERT_TRUE(settles(fds, 1, 1));
  first.reset();  // leaves the epoll set by itself
  LoopbackSocket second;
  ASSERT_EQ(second.fd, number) << "(the kernel gives the lowest free number)";
  EXPECT_TRUE(look(fds, 1, 2)) << "the epoch moved: the set is made again";
  ASSERT_TRUE(settles(fds, 1, 2));
  second.send_one();
  EXPECT_TRUE(watch.maybe_readable(fds, 1, 2));
  EXPECT_TRUE(second.take_one());
}

TEST_F(ReceiveWatchTest, ADisarmedWatchIsArmedAgainAtTheNextLook) {
  LoopbackSocket s;
  pollfd fds[1] = {{s.fd, POLLIN, 0}};
  look(fds, 1);
  ASSERT_TRUE(settles(fds, 1));
  EXPECT_TRUE(watch.armed());
  watch.disarm();
  EXPECT_FALSE(watch.armed());
  // What came while nobody watched is looked for at the next look.
  s.send_one();
  EXPECT_TRUE(watch.maybe_readable(fds, 1, 0));
  EXPECT_TRUE(watch.armed());
  EXPECT_EQ(watch.arms(), 2u);
  EXPECT_TRUE(s.take_one());
  watch.drained(true);
  ASSERT_TRUE(settles(fds, 1));
  s.send_one();
  EXPECT_TRUE(watch.maybe_readable(fds, 1, 0)) << "the new poll sees what comes";
}

}  // namespace
}  // namespace sv::roce
