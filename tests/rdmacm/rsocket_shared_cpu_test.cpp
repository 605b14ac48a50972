// rsockets whose two ends share one CPU. With softverbs both ends of a
// connection run on the same host, so an end that waits competes for the
// CPU with the very end it waits for. A waiting call polls for polling_time
// and then sleeps on the completion channel (as rdma-core's rsockets do),
// and the peer's send rings that channel: the peer gets the CPU at once and
// the answer wakes the waiter. A waiter that kept spinning instead would
// hold the CPU for its whole time slice (milliseconds) before the peer could
// answer, every message: rstream's default mode, whose non-blocking calls
// spin in the application itself, stalls so on an oversubscribed host, and
// would on rdma-core too. These tests keep the library's own waits asleep.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rsocket.h>
#include <sched.h>
#include <sys/socket.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <future>

namespace {

// Round trips of one small message each way. Sleeping waits take tens of
// microseconds per message even beside a CPU hog on that CPU; spinning
// waits take a scheduler time slice per message (about 6 ms measured), so
// 2000 messages would take some 12 s.
constexpr int kRoundTrips = 1000;
constexpr auto kLimit = std::chrono::seconds(2);
constexpr size_t kMessage = 64;

// Binds the calling thread to `cpu`.
void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  ASSERT_EQ(pthread_setaffinity_np(pthread_self(), sizeof set, &set), 0);
}

sockaddr_in loopback() {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return sin;
}

// One message of kMessage bytes, received the way the test asks.
using Receive = std::function<bool(int fd, char* buf)>;

bool blocking_receive(int fd, char* buf) { return rrecv(fd, buf, kMessage, MSG_WAITALL) == ssize_t(kMessage); }

// As rstream -T async -T blocking: rpoll with no timeout, then read what is there.
bool rpoll_receive(int fd, char* buf) {
  size_t got = 0;
  while (got < kMessage) {
    pollfd p{fd, POLLIN, 0};
    if (rpoll(&p, 1, -1) != 1 || !(p.revents & POLLIN)) return false;
    ssize_t n = rrecv(fd, buf + got, kMessage - got, MSG_DONTWAIT);
    if (n > 0) got += size_t(n);
    else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) return false;
  }
  return true;
}

// Connects a pair on one CPU, each end in its own thread, and times
// kRoundTrips round trips: the client sends, the server echoes.
std::chrono::steady_clock::duration ping_pong_on_one_cpu(const Receive& receive) {
  const int cpu = sched_getcpu();
  EXPECT_GE(cpu, 0);
  int listener = rsocket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(listener, 0);
  sockaddr_in addr = loopback();  // port 0: any free one
  EXPECT_EQ(rbind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << strerror(errno);
  EXPECT_EQ(rlisten(listener, 1), 0) << strerror(errno);
  socklen_t len = sizeof addr;
  EXPECT_EQ(rgetsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0) << strerror(errno);

  auto server = std::async(std::launch::async, [&]() -> int {
    pin_to(cpu);
    int fd = raccept(listener, nullptr, nullptr);
    if (fd < 0) return 0;
    char buf[kMessage];
    int echoed = 0;
    while (echoed < kRoundTrips && receive(fd, buf) && rsend(fd, buf, kMessage, 0) == ssize_t(kMessage)) ++echoed;
    rclose(fd);
    return echoed;
  });

  std::chrono::steady_clock::duration took{};
  int done = 0;
  std::thread client([&] {
    pin_to(cpu);
    int fd = rsocket(AF_INET, SOCK_STREAM, 0);
    if (rconnect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ADD_FAILURE() << "rconnect: " << strerror(errno);
      rclose(fd);
      return;
    }
    char buf[kMessage];
    std::memset(buf, 'x', sizeof buf);
    const auto start = std::chrono::steady_clock::now();
    while (done < kRoundTrips && rsend(fd, buf, kMessage, 0) == ssize_t(kMessage) && receive(fd, buf)) ++done;
    took = std::chrono::steady_clock::now() - start;
    rclose(fd);
  });
  client.join();
  EXPECT_EQ(server.get(), kRoundTrips);
  EXPECT_EQ(done, kRoundTrips);
  rclose(listener);
  return took;
}

double ms(std::chrono::steady_clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

TEST(RsocketsSharingOneCpu, BlockingReceiveSleepsSoThePeerRuns) {
  auto took = ping_pong_on_one_cpu(blocking_receive);
  EXPECT_LT(took, kLimit) << kRoundTrips << " round trips took " << ms(took) << " ms";
}

TEST(RsocketsSharingOneCpu, RpollSleepsSoThePeerRuns) {
  auto took = ping_pong_on_one_cpu(rpoll_receive);
  EXPECT_LT(took, kLimit) << kRoundTrips << " round trips took " << ms(took) << " ms";
}

}  // namespace
