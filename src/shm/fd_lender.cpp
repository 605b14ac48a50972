#include "shm/fd_lender.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "shm/runtime_dir.h"
#include "util/fd_passing.h"
#include "util/log.h"
#include "util/quiet_thread.h"

namespace sv::shm {
namespace {

struct Request {
  int32_t fd;
  uint32_t reserved;
  uint64_t ino;
};

// How long either side waits for the other: a lender answers at once, so
// this only bounds a peer that died or stopped mid-exchange.
constexpr int kExchangeTimeoutMs = 2000;

std::string socket_path(pid_t pid) {
  const std::string& dir = runtime_dir();
  return dir.empty() ? "" : dir + "/lend." + std::to_string(pid);
}

// The socket's file in the runtime directory, or nothing: not
// util/unix_socket_address.h's user_unix_address, whose fallback for a long
// path is an abstract name, which any user could bind first.
bool fill_address(const std::string& path, sockaddr_un* a) {
  if (path.empty() || path.size() >= sizeof a->sun_path) return false;
  std::memset(a, 0, sizeof *a);
  a->sun_family = AF_UNIX;
  std::memcpy(a->sun_path, path.c_str(), path.size() + 1);
  return true;
}

void set_timeouts(int s) {
  timeval tv{kExchangeTimeoutMs / 1000, (kExchangeTimeoutMs % 1000) * 1000};
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(s, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// One request on an accepted connection: the descriptor, or a refusal (an
// empty answer), never to another uid.
void answer(int c) {
  ucred cred{};
  socklen_t len = sizeof cred;
  Request r{};
  if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != geteuid() ||
      recv(c, &r, sizeof r, 0) != static_cast<ssize_t>(sizeof r)) {
    return;
  }
  struct stat st;
  const bool ours = r.fd >= 0 && fstat(r.fd, &st) == 0 && st.st_ino == r.ino;
  const char yes = ours ? 1 : 0;
  send_with_fds(c, &yes, 1, &r.fd, ours ? 1 : 0);
}

void* lender_main(void* arg) {
  const int s = static_cast<int>(reinterpret_cast<intptr_t>(arg));
  for (;;) {
    int c = accept4(s, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) {
      if (errno != EINTR && errno != ECONNABORTED) usleep(100'000);  // (out of fds: no spinning)
      continue;
    }
    set_timeouts(c);
    answer(c);
    close(c);
  }
  return nullptr;
}

std::mutex g_mu;
pid_t g_started_pid = 0;  // the process whose lender runs (a fork child starts its own)
int g_socket = -1;
std::string* g_path = nullptr;  // unlinked at exit

}  // namespace

bool start_fd_lender() {
  std::lock_guard g(g_mu);
  const pid_t pid = getpid();
  if (g_started_pid == pid) return true;
  if (g_socket >= 0) close(g_socket);  // the parent's, inherited across fork()
  g_socket = -1;
  const std::string& dir = runtime_dir();
  sockaddr_un a;
  const std::string path = socket_path(pid);
  if (!fill_address(path, &a)) {
    SV_INFO("no fd lender: runtime directory %s", dir.empty() ? "unknown" : "path too long for a unix socket");
    return false;
  }
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  unlink(path.c_str());  // a socket of a process that had our pid before
  if (s < 0 || bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || listen(s, 64) != 0) {
    SV_INFO("no fd lender at %s: %s", path.c_str(), strerror(errno));
    if (s >= 0) close(s);
    return false;
  }
  if (!start_quiet_thread(lender_main, reinterpret_cast<void*>(static_cast<intptr_t>(s)), "softverbs-lend")) {
    unlink(path.c_str());
    close(s);
    return false;
  }
  g_socket = s;
  g_started_pid = pid;
  if (!g_path) {
    g_path = new std::string(path);  // (never freed: read at exit)
    std::atexit([] {
      if (*g_path == socket_path(getpid())) unlink(g_path->c_str());
    });
  } else {
    *g_path = path;
  }
  return true;
}

int borrow_fd(pid_t owner, int fd, uint64_t ino) {
  sockaddr_un a;
  if (!fill_address(socket_path(owner), &a)) {
    errno = ENOENT;
    return -1;
  }
  int s = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  set_timeouts(s);
  Request r{fd, 0, ino};
  char yes = 0;
  int lent = -1, count = 0, got = -1;
  const bool answered = connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                        send(s, &r, sizeof r, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof r) &&
                        receive_with_fds(s, &yes, 1, &lent, 1, &count) == 1;
  if (answered && yes && count == 1) {
    got = lent;
  } else if (answered) {
    if (count) close(lent);
    errno = EACCES;  // refused: not open there on that inode, or not ours to have
  }
  int saved = errno;
  close(s);
  errno = saved;
  return got;
}

}  // namespace sv::shm
