#include "shm/doorbell.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "shm/arena.h"

namespace sv::shm {

bool Doorbell::open(Arena& arena) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return false;
  // The reader blocks by default, as the application expects of a verbs fd;
  // the write end never blocks: a full pipe already means "wake up".
  fcntl(fds[1], F_SETFL, O_NONBLOCK);
  int64_t idx = arena.take_doorbell_index();
  if (idx < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    errno = ENOMEM;
    return false;
  }
  struct stat st;
  fstat(fds[1], &st);
  DoorbellEntry& e = arena.doorbells()[idx];
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  index_ = static_cast<uint32_t>(idx);
  e.write_fd = write_fd_;
  e.ino = st.st_ino;
  gen_ = (e.gen.load(std::memory_order_relaxed) + 2) | 1;
  e.gen.store(gen_, std::memory_order_release);
  return true;
}

void Doorbell::close(Arena& arena) {
  if (read_fd_ < 0) return;
  arena.doorbells()[index_].gen.store(gen_ + 1, std::memory_order_release);  // even: free
  arena.give_doorbell_index(index_);
  ::close(read_fd_);
  ::close(write_fd_);
  read_fd_ = write_fd_ = -1;
}

void ring_fd(int fd) {
  // The doorbell's reader may be gone: its owner closed it (destroyed the
  // completion channel, or exited) just after the caller found it alive.
  // A write to a pipe without a reader raises SIGPIPE, whose default action
  // ends the process (Rsockets.ManyConnectionsServedThroughOneRpoll died of
  // it once in CI: a client's rclose against the server's reply). So
  // SIGPIPE is blocked around the write, and one the write raised is taken
  // back, as libraries that write to sockets without MSG_NOSIGNAL do. The
  // cost, three system calls, is paid once per wake-up of an armed CQ.
  const int saved_errno = errno;
  sigset_t pipe_only, old, pending;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old);
  const bool was_pending = sigpending(&pending) == 0 && sigismember(&pending, SIGPIPE);
  char b = 1;
  // (EAGAIN: the pipe is full of wake-ups already.)
  if (::write(fd, &b, 1) < 0 && errno == EPIPE && !was_pending) {
    const timespec now{0, 0};
    while (sigtimedwait(&pipe_only, nullptr, &now) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  errno = saved_errno;
}

void Doorbell::ring() const { ring_fd(write_fd_); }

void Doorbell::drain() const {
  // FIONREAD keeps this non-blocking whatever mode the application put the
  // fd in: only the bytes already there are read.
  char buf[256];
  int avail = 0;
  while (ioctl(read_fd_, FIONREAD, &avail) == 0 && avail > 0) {
    if (::read(read_fd_, buf, avail > 256 ? 256 : avail) <= 0) return;
  }
}

}  // namespace sv::shm
