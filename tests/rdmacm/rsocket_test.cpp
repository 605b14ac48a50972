// rsockets through their public API (<rdma/rsocket.h>), both ends in this
// process (the server side in a thread): connection set-up and its errors,
// stream semantics (partial reads, MSG_PEEK, MSG_WAITALL, end of stream,
// EPIPE), non-blocking calls, rpoll/rselect, options, riomap/riowrite and
// datagram rsockets.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <rdma/rsocket.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "sanitizers.h"

namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sin.sin_port = htons(port);
  return sin;
}

// Binds `fd` to a loopback port the CM picks (port 0), the way servers that
// tell their clients the port do; returns that port. (Not ports of our own
// choosing: the ASan and the TSan builds of this binary run side by side in
// CI, and a port both chose would put one's client in the other's listener.)
uint16_t bind_any_port(int fd) {
  sockaddr_in addr = loopback(0);
  EXPECT_EQ(rbind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << strerror(errno);
  socklen_t len = sizeof addr;
  EXPECT_EQ(rgetsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0) << strerror(errno);
  EXPECT_NE(addr.sin_port, 0);
  return ntohs(addr.sin_port);
}

// A listening stream socket on a loopback port; *port: which.
int listening_socket(uint16_t* port) {
  int fd = rsocket(AF_INET, SOCK_STREAM, 0);
  EXPECT_GE(fd, 0);
  int one = 1;
  EXPECT_EQ(rsetsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one), 0);
  *port = bind_any_port(fd);
  EXPECT_EQ(rlisten(fd, 4), 0) << strerror(errno);
  return fd;
}

// A connected pair: {client, server}.
struct Pair {
  int client = -1;
  int server = -1;
  int listener = -1;
  Pair() {
    uint16_t port;
    listener = listening_socket(&port);
    auto accepted =
        std::async(std::launch::async, [this] { return raccept(listener, nullptr, nullptr); });
    client = rsocket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = loopback(port);
    EXPECT_EQ(rconnect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0)
        << strerror(errno);
    server = accepted.get();
    EXPECT_GE(server, 0) << strerror(errno);
  }
  ~Pair() {
    if (client >= 0) rclose(client);
    if (server >= 0) rclose(server);
    rclose(listener);
  }
};

ssize_t recv_all(int fd, void* buf, size_t len) { return rrecv(fd, buf, len, MSG_WAITALL); }

TEST(Rsockets, SocketNumbersAreRealFds) {
  int fd = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  EXPECT_NE(fcntl(fd, F_GETFD), -1);
  int dg = rsocket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(dg, 0);
  EXPECT_NE(fcntl(dg, F_GETFD), -1);
  EXPECT_EQ(rclose(fd), 0);
  EXPECT_EQ(rclose(dg), 0);
  fd = rsocket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(rfcntl(fd, F_GETFL), O_NONBLOCK);
  EXPECT_EQ(rclose(fd), 0);
  EXPECT_EQ(rclose(fd), -1);
  EXPECT_EQ(errno, EBADF);
}

TEST(Rsockets, UnsupportedKindsAreRefused) {
  EXPECT_EQ(rsocket(AF_UNIX, SOCK_STREAM, 0), -1);
  EXPECT_EQ(errno, ENOTSUP);
  EXPECT_EQ(rsocket(AF_INET, SOCK_STREAM, IPPROTO_UDP), -1);
  EXPECT_EQ(rsend(12345, "x", 1, 0), -1);
  EXPECT_EQ(errno, EBADF);
}

TEST(Rsockets, ConnectWithoutListenerIsRefused) {
  // (A port that is bound, by us, but has no listener: nobody else's.)
  int bound = rsocket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr = loopback(bind_any_port(bound));
  int fd = rsocket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(rconnect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), -1);
  EXPECT_EQ(errno, ECONNREFUSED);
  rclose(fd);
  rclose(bound);
}

TEST(Rsockets, NonBlockingConnectCompletesThroughRpoll) {
  uint16_t port;
  int listener = listening_socket(&port);
  int fd = rsocket(AF_INET, SOCK_STREAM, 0);
  ASSERT_EQ(rfcntl(fd, F_SETFL, O_NONBLOCK), 0);
  EXPECT_EQ(rfcntl(fd, F_GETFL), O_NONBLOCK);
  sockaddr_in addr = loopback(port);
  int rc = rconnect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  EXPECT_TRUE(rc == 0 || errno == EINPROGRESS) << strerror(errno);
  // The listener sees the request; accepting it lets the connect finish.
  pollfd lp{listener, POLLIN, 0};
  ASSERT_EQ(rpoll(&lp, 1, 5000), 1);
  int server = raccept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0) << strerror(errno);
  pollfd cp{fd, POLLOUT, 0};
  ASSERT_EQ(rpoll(&cp, 1, 5000), 1);
  EXPECT_TRUE(cp.revents & POLLOUT);
  int err = -1;
  socklen_t len = sizeof err;
  EXPECT_EQ(rgetsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
  EXPECT_EQ(err, 0);
  EXPECT_EQ(rsend(fd, "ping", 4, 0), 4);
  char buf[4];
  EXPECT_EQ(recv_all(server, buf, 4), 4);
  rclose(fd);
  rclose(server);
  rclose(listener);
}

TEST(Rsockets, NonBlockingAcceptAndReceiveSayEagain) {
  uint16_t port;
  int listener = listening_socket(&port);
  ASSERT_EQ(rfcntl(listener, F_SETFL, O_NONBLOCK), 0);
  EXPECT_EQ(raccept(listener, nullptr, nullptr), -1);
  EXPECT_EQ(errno, EAGAIN);
  rclose(listener);
  Pair p;
  char c;
  EXPECT_EQ(rrecv(p.client, &c, 1, MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EAGAIN);
}

TEST(Rsockets, BytesArriveInOrderAcrossTheRing) {
  Pair p;  // default 128 KiB rings: the 3 MiB stream wraps many times
  std::vector<uint8_t> out(3 << 20), in(out.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
  auto sender = std::async(std::launch::async, [&] {
    size_t off = 0;
    while (off < out.size()) {
      size_t n = std::min<size_t>(out.size() - off, 1 + (off % 70000));
      ssize_t r = rsend(p.client, out.data() + off, n, 0);
      if (r <= 0) return false;
      off += static_cast<size_t>(r);
    }
    return true;
  });
  EXPECT_EQ(recv_all(p.server, in.data(), in.size()), static_cast<ssize_t>(in.size()));
  EXPECT_TRUE(sender.get());
  EXPECT_EQ(in, out);
}

TEST(Rsockets, SmallBuffersAndQueuesStillCarryEverything) {
  int listener = rsocket(AF_INET, SOCK_STREAM, 0);
  int small = 4096, q = 16, zero = 0;
  EXPECT_EQ(rsetsockopt(listener, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
  EXPECT_EQ(rsetsockopt(listener, SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
  EXPECT_EQ(rsetsockopt(listener, SOL_RDMA, RDMA_SQSIZE, &q, sizeof q), 0);
  EXPECT_EQ(rsetsockopt(listener, SOL_RDMA, RDMA_RQSIZE, &q, sizeof q), 0);
  EXPECT_EQ(rsetsockopt(listener, SOL_RDMA, RDMA_INLINE, &zero, sizeof zero), 0);
  sockaddr_in addr = loopback(bind_any_port(listener));
  ASSERT_EQ(rlisten(listener, 1), 0);
  auto accepted =
      std::async(std::launch::async, [&] { return raccept(listener, nullptr, nullptr); });
  int client = rsocket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(rsetsockopt(client, SOL_SOCKET, SO_RCVBUF, &small, sizeof small), 0);
  EXPECT_EQ(rsetsockopt(client, SOL_RDMA, RDMA_SQSIZE, &q, sizeof q), 0);
  EXPECT_EQ(rsetsockopt(client, SOL_RDMA, RDMA_RQSIZE, &q, sizeof q), 0);
  ASSERT_EQ(rconnect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  int server = accepted.get();
  ASSERT_GE(server, 0);
  int value = 0;
  socklen_t len = sizeof value;
  EXPECT_EQ(rgetsockopt(server, SOL_SOCKET, SO_RCVBUF, &value, &len), 0);
  EXPECT_EQ(value, small);  // inherited from the listener
  EXPECT_EQ(rgetsockopt(server, SOL_RDMA, RDMA_SQSIZE, &value, &len), 0);
  EXPECT_EQ(value, q);
  EXPECT_EQ(rsetsockopt(server, SOL_RDMA, RDMA_SQSIZE, &q, sizeof q), -1);  // too late
  EXPECT_EQ(errno, EINVAL);

  std::vector<uint8_t> out(1 << 20), in(out.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(i ^ (i >> 8));
  // Both directions at once, in byte-sized and odd-sized pieces.
  auto there = std::async(std::launch::async, [&] {
    for (size_t off = 0; off < out.size();) {
      ssize_t r = rsend(client, out.data() + off,
                        std::min<size_t>(out.size() - off, off % 3 ? 1 : 3001), 0);
      if (r <= 0) return false;
      off += static_cast<size_t>(r);
    }
    return true;
  });
  auto back = std::async(std::launch::async, [&] {
    for (size_t off = 0; off < out.size();) {
      ssize_t r = rsend(server, out.data() + off, std::min<size_t>(out.size() - off, 777), 0);
      if (r <= 0) return false;
      off += static_cast<size_t>(r);
    }
    return true;
  });
  std::vector<uint8_t> in2(out.size());
  auto recv_back =
      std::async(std::launch::async, [&] { return recv_all(client, in2.data(), in2.size()); });
  EXPECT_EQ(recv_all(server, in.data(), in.size()), static_cast<ssize_t>(in.size()));
  EXPECT_EQ(recv_back.get(), static_cast<ssize_t>(in2.size()));
  EXPECT_TRUE(there.get());
  EXPECT_TRUE(back.get());
  EXPECT_EQ(in, out);
  EXPECT_EQ(in2, out);
  rclose(client);
  rclose(server);
  rclose(listener);
}

TEST(Rsockets, PeekWaitallAndVectors) {
  Pair p;
  ASSERT_EQ(rsend(p.client, "hello world", 11, 0), 11);
  char buf[16] = {};
  EXPECT_EQ(recv_all(p.server, buf, 5), 5);
  EXPECT_EQ(rrecv(p.server, buf, 3, MSG_PEEK), 3);
  EXPECT_EQ(std::string(buf, 3), " wo");
  iovec iov[2] = {{buf, 2}, {buf + 8, 4}};
  EXPECT_EQ(rreadv(p.server, iov, 2), 6);
  EXPECT_EQ(std::string(buf, 2), " w");
  EXPECT_EQ(std::string(buf + 8, 4), "orld");
  iovec out[3] = {
      {const_cast<char*>("ab"), 2}, {const_cast<char*>(""), 0}, {const_cast<char*>("cde"), 3}};
  EXPECT_EQ(rwritev(p.client, out, 3), 5);
  msghdr msg{};
  iovec one{buf, 5};
  msg.msg_iov = &one;
  msg.msg_iovlen = 1;
  EXPECT_EQ(rrecvmsg(p.server, &msg, MSG_WAITALL), 5);
  EXPECT_EQ(std::string(buf, 5), "abcde");
}

TEST(Rsockets, ShutdownGivesEndOfStreamAfterTheData) {
  Pair p;
  ASSERT_EQ(rsend(p.client, "last", 4, 0), 4);
  ASSERT_EQ(rshutdown(p.client, SHUT_WR), 0);
  EXPECT_EQ(rsend(p.client, "x", 1, 0), -1);
  EXPECT_EQ(errno, EPIPE);
  char buf[8];
  EXPECT_EQ(recv_all(p.server, buf, 8), 4);  // WAITALL stops at the end of stream
  EXPECT_EQ(rrecv(p.server, buf, 8, 0), 0);
  // The other direction still works.
  EXPECT_EQ(rsend(p.server, "back", 4, 0), 4);
  EXPECT_EQ(recv_all(p.client, buf, 4), 4);
}

TEST(Rsockets, ClosedPeerGivesEndOfStreamThenEpipe) {
  Pair p;
  ASSERT_EQ(rsend(p.client, "bye", 3, 0), 3);
  rclose(p.client);
  p.client = -1;
  char buf[8];
  EXPECT_EQ(recv_all(p.server, buf, 3), 3);
  EXPECT_EQ(rrecv(p.server, buf, 8, 0), 0);
  EXPECT_EQ(rsend(p.server, "x", 1, 0), -1);
  EXPECT_EQ(errno, EPIPE);
  pollfd pfd{p.server, POLLIN | POLLOUT, 0};
  EXPECT_EQ(rpoll(&pfd, 1, 1000), 1);
  EXPECT_TRUE(pfd.revents & POLLIN);
}

// The peer sends and closes at once while this end keeps polling. Its
// DISCONNECTED reaching us between our CQ poll and our CM read used to end
// the stream before its last bytes, which were in our CQ already: rrecv
// returned 0 (about one round in 25 before the fix, none after).
TEST(Rsockets, EndOfStreamNeverOvertakesTheLastBytes) {
  constexpr int kRounds = 300;
  uint16_t port;  // one listener for every round
  int listener = listening_socket(&port);
  sockaddr_in addr = loopback(port);
  int lost = 0;
  for (int round = 0; round < kRounds; ++round) {
    auto accepted = std::async(std::launch::async, [&] { return raccept(listener, nullptr, nullptr); });
    int client = rsocket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(rconnect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0) << strerror(errno);
    int server = accepted.get();
    ASSERT_GE(server, 0) << strerror(errno);
    std::thread closer([server] {
      rsend(server, "last", 4, 0);
      rclose(server);
    });
    char buf[8];
    ssize_t n;
    do {
      n = rrecv(client, buf, 4, MSG_DONTWAIT);
    } while (n < 0 && errno == EAGAIN);
    closer.join();
    rclose(client);
    if (n != 4) ++lost;
  }
  rclose(listener);
  EXPECT_EQ(lost, 0) << "rounds whose last bytes came after the end of stream, of " << kRounds;
}

TEST(Rsockets, PeerProcessThatDiesEndsTheStream) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  uint16_t port;
  int listener = listening_socket(&port);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    int fd = rsocket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr = loopback(port);
    if (rconnect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) _exit(1);
    if (rsend(fd, "x", 1, 0) != 1) _exit(2);
    char c;
    if (rrecv(fd, &c, 1, MSG_WAITALL) != 1) _exit(3);
    _exit(0);  // no rclose: the process just ends
  }
  int server = raccept(listener, nullptr, nullptr);
  ASSERT_GE(server, 0) << strerror(errno);
  char c;
  ASSERT_EQ(recv_all(server, &c, 1), 1);
  ASSERT_EQ(rsend(server, "y", 1, 0), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_EQ(WEXITSTATUS(status), 0);
  pollfd pfd{server, POLLIN, 0};
  ASSERT_EQ(rpoll(&pfd, 1, 5000), 1);
  EXPECT_EQ(rrecv(server, &c, 1, 0), 0);
  EXPECT_EQ(rsend(server, "z", 1, 0), -1);
  EXPECT_EQ(errno, EPIPE);
  rclose(server);
  rclose(listener);
}

TEST(Rsockets, ManyConnectionsServedThroughOneRpoll) {
  constexpr int kClients = 6;
  uint16_t port;
  int listener = listening_socket(&port);
  std::vector<std::future<bool>> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.push_back(std::async(std::launch::async, [port, c] {
      int fd = rsocket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr = loopback(port);
      if (rconnect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return false;
      bool ok = true;
      for (int i = 0; i < 200 && ok; ++i) {
        uint32_t out = static_cast<uint32_t>(c << 16 | i), in = 0;
        ok = rsend(fd, &out, sizeof out, 0) == sizeof out &&
             rrecv(fd, &in, sizeof in, MSG_WAITALL) == sizeof in && in == out + 1;
      }
      rclose(fd);
      return ok;
    }));
  }
  // One thread serves everybody: accept and echo (plus one) whatever is readable.
  std::vector<pollfd> fds{{listener, POLLIN, 0}};
  int finished = 0;
  while (finished < kClients) {
    ASSERT_GT(rpoll(fds.data(), fds.size(), 10000), 0);
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
      uint32_t v;
      ssize_t n = rrecv(fds[i].fd, &v, sizeof v, MSG_WAITALL);
      if (n == 0) {
        rclose(fds[i].fd);
        fds[i].fd = -1;
        ++finished;
        continue;
      }
      ASSERT_EQ(n, static_cast<ssize_t>(sizeof v));
      ++v;
      ASSERT_EQ(rsend(fds[i].fd, &v, sizeof v, 0), static_cast<ssize_t>(sizeof v));
    }
    if (fds[0].revents & POLLIN) {
      int fd = raccept(listener, nullptr, nullptr);
      ASSERT_GE(fd, 0) << strerror(errno);
      fds.push_back(pollfd{fd, POLLIN, 0});
    }
  }
  for (auto& c : clients) EXPECT_TRUE(c.get());
  rclose(listener);
}

TEST(Rsockets, RpollSleepsUntilDataAndMixesOrdinaryFds) {
  Pair p;
  int pipefd[2];
  ASSERT_EQ(pipe(pipefd), 0);
  pollfd fds[2] = {{p.server, POLLIN, 0}, {pipefd[0], POLLIN, 0}};
  EXPECT_EQ(rpoll(fds, 2, 50), 0);  // nothing yet: times out
  std::thread later([&] {
    usleep(100000);
    rsend(p.client, "z", 1, 0);
  });
  EXPECT_EQ(rpoll(fds, 2, 5000), 1);
  EXPECT_TRUE(fds[0].revents & POLLIN);
  later.join();
  ASSERT_EQ(write(pipefd[1], "p", 1), 1);
  EXPECT_EQ(rpoll(fds, 2, 1000), 2);
  fd_set rd;
  FD_ZERO(&rd);
  FD_SET(p.server, &rd);
  FD_SET(pipefd[0], &rd);
  timeval tv{1, 0};
  EXPECT_EQ(rselect(std::max(p.server, pipefd[0]) + 1, &rd, nullptr, nullptr, &tv), 2);
  EXPECT_TRUE(FD_ISSET(p.server, &rd));
  close(pipefd[0]);
  close(pipefd[1]);
}

TEST(Rsockets, NamesAndOptions) {
  Pair p;
  sockaddr_in local{}, peer{};
  socklen_t len = sizeof local;
  EXPECT_EQ(rgetsockname(p.server, reinterpret_cast<sockaddr*>(&local), &len), 0);
  len = sizeof peer;
  EXPECT_EQ(rgetpeername(p.client, reinterpret_cast<sockaddr*>(&peer), &len), 0);
  EXPECT_EQ(len, sizeof peer);
  EXPECT_EQ(peer.sin_port, local.sin_port);
  int one = 1, value = 0;
  len = sizeof value;
  EXPECT_EQ(rsetsockopt(p.client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one), 0);
  EXPECT_EQ(rgetsockopt(p.client, IPPROTO_TCP, TCP_NODELAY, &value, &len), 0);
  EXPECT_EQ(value, 1);
  EXPECT_EQ(rsetsockopt(p.client, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one), 0);
  EXPECT_EQ(rgetsockopt(p.client, SOL_SOCKET, SO_KEEPALIVE, &value, &len), 0);
  EXPECT_EQ(value, 1);
  linger l{1, 5}, back{};
  socklen_t llen = sizeof back;
  EXPECT_EQ(rsetsockopt(p.client, SOL_SOCKET, SO_LINGER, &l, sizeof l), 0);
  EXPECT_EQ(rgetsockopt(p.client, SOL_SOCKET, SO_LINGER, &back, &llen), 0);
  EXPECT_EQ(back.l_linger, 5);
  EXPECT_EQ(rgetsockopt(p.client, IPPROTO_TCP, TCP_MAXSEG, &value, &len), 0);
  EXPECT_GT(value, 0);
  EXPECT_EQ(rsetsockopt(p.client, SOL_SOCKET, SO_BROADCAST, &one, sizeof one), -1);
  EXPECT_EQ(errno, ENOTSUP);
}

TEST(Rsockets, RiowritePlacesBytesInTheMappedBuffer) {
  int listener = rsocket(AF_INET, SOCK_STREAM, 0);
  int slots = 2;
  EXPECT_EQ(rsetsockopt(listener, SOL_RDMA, RDMA_IOMAPSIZE, &slots, sizeof slots), 0);
  sockaddr_in addr = loopback(bind_any_port(listener));
  ASSERT_EQ(rlisten(listener, 1), 0);
  auto accepted =
      std::async(std::launch::async, [&] { return raccept(listener, nullptr, nullptr); });
  int client = rsocket(AF_INET, SOCK_STREAM, 0);
  EXPECT_EQ(rsetsockopt(client, SOL_RDMA, RDMA_IOMAPSIZE, &slots, sizeof slots), 0);
  ASSERT_EQ(rconnect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  int server = accepted.get();
  ASSERT_GE(server, 0);

  // Pages of its own, not the heap: registering heap pages and then
  // fork()ing (PeerProcessThatDiesEndsTheStream, in the same process under
  // --gtest_repeat) trips over a softverbs core issue with overlaid heap
  // pages at fork.
  const size_t target_len = 200000;
  auto* target = static_cast<uint8_t*>(
      mmap(nullptr, target_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  ASSERT_NE(target, MAP_FAILED);
  ASSERT_EQ(riomap(server, target, target_len, PROT_WRITE, 0, 4096), 4096);
  // The mapping travels ahead of this byte: once it is read, the client
  // knows the mapping.
  ASSERT_EQ(rsend(server, "m", 1, 0), 1);
  char c;
  ASSERT_EQ(recv_all(client, &c, 1), 1);
  std::vector<uint8_t> src(150000);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 7 + 1);
  EXPECT_EQ(riowrite(client, src.data(), src.size(), 4096 + 1000, 0), src.size());
  // A stream byte after the writes: they landed before it.
  ASSERT_EQ(rsend(client, "d", 1, 0), 1);
  ASSERT_EQ(recv_all(server, &c, 1), 1);
  EXPECT_EQ(std::memcmp(target + 1000, src.data(), src.size()), 0);
  EXPECT_EQ(target[999], 0);
  EXPECT_EQ(riowrite(client, src.data(), 10, 1 << 30, 0), SIZE_MAX);  // not mapped
  EXPECT_EQ(errno, EINVAL);
  EXPECT_EQ(riounmap(server, target, target_len), 0);
  EXPECT_EQ(riounmap(server, target, target_len), -1);
  rclose(client);
  rclose(server);
  rclose(listener);
  munmap(target, target_len);
}

TEST(Rsockets, DatagramsBothWaysWithAddresses) {
  int a = rsocket(AF_INET, SOCK_DGRAM, 0);
  int b = rsocket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  sockaddr_in addr = loopback(bind_any_port(a));
  char buf[64] = {};
  sockaddr_in from{};
  socklen_t len = sizeof from;
  // First datagram to a new peer, then answers, several rounds.
  for (int round = 0; round < 5; ++round) {
    ASSERT_EQ(rsendto(b, "ping", 5, 0, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 5);
    len = sizeof from;
    ASSERT_EQ(rrecvfrom(a, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len), 5);
    EXPECT_STREQ(buf, "ping");
    EXPECT_EQ(from.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    ASSERT_EQ(rsendto(a, "pong", 5, 0, reinterpret_cast<sockaddr*>(&from), len), 5);
    sockaddr_in from_a{};
    socklen_t len_a = sizeof from_a;
    ASSERT_EQ(rrecvfrom(b, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from_a), &len_a), 5);
    EXPECT_STREQ(buf, "pong");
    EXPECT_EQ(from_a.sin_port, addr.sin_port);
  }
  // Larger than one UD message can carry: still delivered whole.
  std::vector<char> big(20000, 'x');
  ASSERT_EQ(rsendto(a, big.data(), big.size(), 0, reinterpret_cast<sockaddr*>(&from), len),
            static_cast<ssize_t>(big.size()));
  std::vector<char> got(big.size() + 10);
  EXPECT_EQ(rrecv(b, got.data(), got.size(), 0), static_cast<ssize_t>(big.size()));
  // Nothing more: non-blocking says so, rpoll times out.
  EXPECT_EQ(rrecv(b, buf, sizeof buf, MSG_DONTWAIT), -1);
  EXPECT_EQ(errno, EAGAIN);
  pollfd pfd{b, POLLIN, 0};
  EXPECT_EQ(rpoll(&pfd, 1, 50), 0);
  rclose(a);
  rclose(b);
}

TEST(Rsockets, ConnectedDatagramSocketUsesSendAndRecv) {
  int server = rsocket(AF_INET, SOCK_DGRAM, 0);
  sockaddr_in addr = loopback(bind_any_port(server));
  int client = rsocket(AF_INET, SOCK_DGRAM, 0);
  ASSERT_EQ(rconnect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  EXPECT_EQ(rsend(client, "one", 4, 0), 4);
  char buf[8];
  sockaddr_in from{};
  socklen_t len = sizeof from;
  ASSERT_EQ(rrecvfrom(server, buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&from), &len), 4);
  ASSERT_EQ(rsendto(server, "two", 4, 0, reinterpret_cast<sockaddr*>(&from), len), 4);
  pollfd pfd{client, POLLIN, 0};
  ASSERT_EQ(rpoll(&pfd, 1, 5000), 1);
  EXPECT_EQ(rrecv(client, buf, sizeof buf, 0), 4);
  EXPECT_STREQ(buf, "two");
  EXPECT_EQ(rsend(server, "x", 1, 0), -1);  // not connected
  EXPECT_EQ(errno, EDESTADDRREQ);
  rclose(client);
  rclose(server);
}

}  // namespace
