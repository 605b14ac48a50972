// Ringing a doorbell (a pipe) whose reader has gone: its owner destroyed
// the completion channel, or exited, just after the ringer found it alive.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "shm/doorbell.h"

namespace sv::shm {
namespace {

// With SIGPIPE's default action (the process ends), as in an application
// that never touched it: the ring is lost, the process goes on, and no
// SIGPIPE is left pending for later.
TEST(Doorbell, RingingOneWhoseReaderClosedRaisesNoSigpipe) {
  struct sigaction dfl{}, old{};
  dfl.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(SIGPIPE, &dfl, &old), 0);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  errno = 1234;
  ring_fd(fds[1]);
  EXPECT_EQ(errno, 1234);  // the caller's errno is kept
  sigset_t pending;
  ASSERT_EQ(sigpending(&pending), 0);
  EXPECT_FALSE(sigismember(&pending, SIGPIPE));
  close(fds[1]);
  sigaction(SIGPIPE, &old, nullptr);
}

// A SIGPIPE the application has blocked and that was pending before the
// ring stays pending: only the one the ring raised is taken back.
TEST(Doorbell, ASigpipePendingBeforeTheRingStaysPending) {
  sigset_t pipe_only, old;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &pipe_only, &old), 0);
  ASSERT_EQ(pthread_kill(pthread_self(), SIGPIPE), 0);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[0]);
  ring_fd(fds[1]);
  sigset_t pending;
  ASSERT_EQ(sigpending(&pending), 0);
  EXPECT_TRUE(sigismember(&pending, SIGPIPE));
  const timespec now{0, 0};
  EXPECT_EQ(sigtimedwait(&pipe_only, nullptr, &now), SIGPIPE);  // the application's own, consumed here
  close(fds[1]);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// A live doorbell still rings.
TEST(Doorbell, RingingALiveOneWritesAByte) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  ring_fd(fds[1]);
  char b = 0;
  EXPECT_EQ(read(fds[0], &b, 1), 1);
  EXPECT_EQ(b, 1);
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace sv::shm
