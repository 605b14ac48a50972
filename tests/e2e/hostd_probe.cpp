// A hostile local user of the host service (softverbs-hostd), for the
// tests of its trust boundary (tests/e2e/hostd_*.sh):
//   hostd_probe connections N HOLD_S   open N connections and hold them
//                                      HOLD_S seconds; prints how many were
//                                      taken, refused (told why) or not made
//                                      (still waiting to connect after 5 s,
//                                      as a blocking connect() would be)
//   hostd_probe claims N CONNS HOLD_S  make N CM mailbox claims spread over
//                                      CONNS connections, then hold them
//                                      HOLD_S s; prints how many were
//                                      granted, refused and unanswered
//   hostd_probe leases HOLD_S          lease every slot it can, one
//                                      connection each, and hold them
//   hostd_probe malformed              every message type truncated,
//                                      oversized and unknown types, then a
//                                      second lease on one connection; exits
//                                      0 if the service still answers
//                                      leases correctly afterwards
// It speaks the service's protocol directly (util/host_service_socket.h),
// as anyone may.
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "util/fd_passing.h"
#include "util/host_service_socket.h"
#include "util/unix_socket_address.h"

namespace hostd = sv::hostd;

namespace {

// A raw, non-blocking connection to the service: -1 when the connect did
// not complete (backlog full, no service).
int raw_connect() {
  const int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return -1;
  socklen_t len;
  const sockaddr_un a = sv::abstract_unix_address(sv::kHostServiceSocket, &len);
  if (connect(fd, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Waits up to `ms` for a message on `fd`; its length (0: none came, -1: closed).
ssize_t wait_message(int fd, void* buf, size_t cap, int ms) {
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return 0;
  const ssize_t n = recv(fd, buf, cap, MSG_DONTWAIT);
  return n == 0 ? -1 : n;
}

// Leases `slot` on `fd`: 1 granted, 0 refused, -1 no answer or refusal of the connection.
int lease(int fd, uint32_t slot, uint32_t* holder = nullptr) {
  hostd::Lease req;
  req.slot = slot;
  if (send(fd, &req, sizeof req, MSG_NOSIGNAL) != sizeof req) return -1;
  hostd::ReplyBuffer m;
  const ssize_t got = wait_message(fd, m.bytes, sizeof m.bytes, 5000);
  if (got != static_cast<ssize_t>(sizeof(hostd::LeaseReply))) return -1;
  const auto rep = m.as<hostd::LeaseReply>();
  if (rep.type != hostd::kLeaseReply || rep.slot != slot) return -1;
  if (holder) *holder = rep.holder_uid;
  if (!rep.granted) return 0;
  // A granted lease is followed by the sockets the process receives with.
  hostd::Sockets m2;
  int fds[sv::kMaxPassedFds];
  int count = 0;
  pollfd p{fd, POLLIN, 0};
  if (poll(&p, 1, 5000) <= 0 || sv::receive_with_fds(fd, &m2, sizeof m2, fds, sv::kMaxPassedFds, &count) !=
                                    static_cast<ssize_t>(sizeof m2) || m2.type != hostd::kSockets)
    return -1;
  for (int i = 0; i < count; ++i) close(fds[i]);
  return 1;
}

int connections(int count, int hold_s) {
  std::vector<int> fds;
  int not_made = 0;
  // As blocking connects would: each waits while the backlog is full, up
  // to 5 s in all.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (int i = 0; i < count; ++i) {
    int fd = raw_connect();
    while (fd < 0 && errno == EAGAIN && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      fd = raw_connect();
    }
    if (fd < 0) ++not_made;
    else fds.push_back(fd);
  }
  // Which the service took: a refused one is told so, then closed.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  int refused = 0, taken = 0;
  for (int& fd : fds) {
    hostd::ReplyBuffer m;
    const ssize_t got = recv(fd, m.bytes, sizeof m.bytes, MSG_DONTWAIT);
    if (m.refused(got)) {
      ++refused;
      close(fd);
      fd = -1;
    } else {
      ++taken;  // (or still in the backlog: held all the same)
    }
  }
  std::printf("connections: %d made, %d refused by the service, %d not made\n", taken, refused, not_made);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(hold_s));
  return taken + refused > 0 ? 0 : 1;
}

hostd::Claim claim_message(const std::string& key) {
  hostd::Claim c;
  c.length = static_cast<uint32_t>(key.size());
  std::memcpy(c.key, key.data(), key.size());
  return c;
}

int claims(int count, int conns, int hold_s) {
  std::vector<int> fds;
  for (int i = 0; i < conns; ++i) {
    const int fd = raw_connect();
    if (fd < 0) return std::fprintf(stderr, "no host service\n"), 1;
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);  // (sends wait for the service, as a CM's do)
    fds.push_back(fd);
  }
  const auto start = std::chrono::steady_clock::now();
  int granted = 0, refused = 0, unanswered = 0;
  // In windows of 1024 per connection, as fast as the service answers.
  constexpr int kWindow = 1024;
  for (int done = 0; done < count;) {
    int sent[64] = {};
    for (int c = 0; c < conns && done < count; ++c) {
      for (; sent[c] < kWindow && done < count; ++sent[c], ++done) {
        const hostd::Claim m = claim_message("gsi-id-flood-" + std::to_string(done));
        if (send(fds[c], &m, sizeof m, MSG_NOSIGNAL) != sizeof m) return std::perror("send"), 1;
      }
    }
    for (int c = 0; c < conns; ++c) {
      for (int i = 0; i < sent[c]; ++i) {
        hostd::ReplyBuffer m;
        const ssize_t got = wait_message(fds[c], m.bytes, sizeof m.bytes, 10000);
        if (got != static_cast<ssize_t>(sizeof(hostd::ClaimReply))) {
          ++unanswered;
          continue;
        }
        if (m.as<hostd::ClaimReply>().granted) ++granted;
        else ++refused;
      }
    }
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("claims: %d granted, %d refused, %d unanswered, in %.2f s\n", granted, refused, unanswered, s);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(hold_s));
  return unanswered ? 1 : 0;
}

int leases(int hold_s) {
  std::vector<int> fds;
  int held = 0;
  for (uint32_t slot = 1; slot < 256; ++slot) {
    const int fd = raw_connect();
    if (fd < 0) break;
    if (lease(fd, slot) == 1) {
      ++held;
      fds.push_back(fd);
    } else {
      close(fd);
    }
  }
  std::printf("leases: %d slots held\n", held);
  std::fflush(stdout);
  std::this_thread::sleep_for(std::chrono::seconds(hold_s));
  return held ? 0 : 1;
}

int malformed() {
  // Every type the service knows, and some it does not, at lengths 0..
  // around its struct and far beyond: each on a connection of its own
  // (the service may close one it cannot make sense of) and one shared.
  const int shared = raw_connect();
  if (shared < 0) return std::fprintf(stderr, "no host service\n"), 1;
  std::vector<uint8_t> junk(70000);
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<uint8_t>(i * 131 + 7);
  int sent = 0;
  for (int type = 0; type < 12; ++type) {
    for (size_t len : {size_t{1}, size_t{2}, size_t{7}, size_t{8}, size_t{15}, size_t{16}, size_t{47}, size_t{48},
                       size_t{63}, size_t{128}, size_t{129}, size_t{1500}, size_t{65535}, size_t{69999}}) {
      junk[0] = static_cast<uint8_t>(type);
      const int own = raw_connect();
      for (int fd : {own, shared})
        if (fd >= 0 && send(fd, junk.data(), len, MSG_NOSIGNAL | MSG_DONTWAIT) > 0) ++sent;
      if (own >= 0) close(own);
    }
  }
  std::printf("malformed: %d messages sent\n", sent);
  // The service still answers: a lease on a fresh connection, and a second
  // lease on the same connection is refused (one per process).
  const int fd = raw_connect();
  if (fd < 0) return std::printf("FAIL: the service takes no connection after the malformed messages\n"), 1;
  int got = -1;
  uint32_t slot = 255;
  for (; slot > 1 && (got = lease(fd, slot)) == 0; --slot) {
  }
  if (got != 1) return std::printf("FAIL: no lease after the malformed messages (%d)\n", got), 1;
  uint32_t holder = 0;
  const int second = lease(fd, slot - 1, &holder);
  if (second != 0)
    return std::printf("FAIL: a second lease on one connection was %s\n", second > 0 ? "granted" : "unanswered"), 1;
  std::printf("malformed: the service still leases (slot %u), and refused a second lease on one connection\n", slot);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "";
  if (what == "connections" && argc == 4) return connections(std::atoi(argv[2]), std::atoi(argv[3]));
  if (what == "claims" && argc == 5 && std::atoi(argv[3]) > 0 && std::atoi(argv[3]) <= 64)
    return claims(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]));
  if (what == "leases" && argc == 3) return leases(std::atoi(argv[2]));
  if (what == "malformed" && argc == 2) return malformed();
  std::fprintf(stderr, "usage: %s connections N HOLD_S | claims N CONNS HOLD_S | leases HOLD_S | malformed\n", argv[0]);
  return 2;
}
