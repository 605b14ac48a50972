// The TCP baseline for connection set-up (bench/cm_setup.sh): how long N
// TCP connections over loopback take to establish, measured the way cmtime
// reports its "connect" step: all N started at once, total time over N.
//   tcp_connect_time server PORT N       accepts N connections, then exits
//   tcp_connect_time client HOST PORT N  connects N sockets, prints the time
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

int serve(uint16_t port, int count) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) || listen(fd, 4096)) {
    perror("bind/listen");
    return 1;
  }
  std::vector<int> conns;
  for (int i = 0; i < count; ++i) {
    int c = accept(fd, nullptr, nullptr);
    if (c < 0) return 1;
    // Like an rdma_accept: answer, so the client knows it was accepted.
    char byte = 1;
    if (write(c, &byte, 1) != 1) return 1;
    conns.push_back(c);
  }
  for (int c : conns) close(c);
  close(fd);
  return 0;
}

// All N at once, as cmtime does: start every connect, then wait until each
// socket has its "accepted" byte.
int connect_all(const char* host, uint16_t port, int count) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, host, &addr.sin_addr);
  std::vector<pollfd> fds;
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
      perror("connect");
      return 1;
    }
    fds.push_back(pollfd{fd, POLLIN, 0});
  }
  int left = count;
  while (left > 0) {
    if (poll(fds.data(), fds.size(), 10000) <= 0) return 1;
    for (pollfd& p : fds) {
      if (p.fd < 0 || !(p.revents & POLLIN)) continue;
      char byte;
      if (read(p.fd, &byte, 1) != 1) return 1;
      close(p.fd);
      p.fd = -1;
      --left;
    }
  }
  double total_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::printf("connect      : %10.2f ms total %10.2f us / conn\n", total_ms, total_ms * 1000 / count);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && !std::strcmp(argv[1], "server")) return serve(std::atoi(argv[2]), std::atoi(argv[3]));
  if (argc == 5 && !std::strcmp(argv[1], "client"))
    return connect_all(argv[2], std::atoi(argv[3]), std::atoi(argv[4]));
  std::fprintf(stderr, "usage: %s server PORT N | client HOST PORT N\n", argv[0]);
  return 2;
}
