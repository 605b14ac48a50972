// The fd lender (shm/fd_lender.h): a process lends a descriptor only when
// it is open there on the inode the asker names; nothing is lent by a
// process that has no lender. (That the lender is what lets two processes
// with a user namespace between them reach each other is end-to-end:
// mw_device_user_pairs.)
#include "shm/fd_lender.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "sanitizers.h"

namespace {

uint64_t inode_of(int fd) {
  struct stat st;
  return fstat(fd, &st) == 0 ? st.st_ino : 0;
}

class FdLender : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(sv::shm::start_fd_lender());
    ASSERT_EQ(pipe(fds_), 0);
  }
  void TearDown() override {
    close(fds_[0]);
    close(fds_[1]);
  }
  int fds_[2] = {-1, -1};
};

TEST_F(FdLender, LendsTheDescriptorOnTheNamedInode) {
  int got = sv::shm::borrow_fd(getpid(), fds_[1], inode_of(fds_[1]));
  ASSERT_GE(got, 0) << strerror(errno);
  EXPECT_NE(got, fds_[1]);  // a descriptor of its own, on the same pipe
  EXPECT_EQ(inode_of(got), inode_of(fds_[1]));
  ASSERT_EQ(write(got, "x", 1), 1);
  char c = 0;
  EXPECT_EQ(read(fds_[0], &c, 1), 1);
  EXPECT_EQ(c, 'x');
  EXPECT_NE(fcntl(got, F_GETFD) & FD_CLOEXEC, 0);
  close(got);
}

TEST_F(FdLender, RefusesAnotherInode) {
  // fd_[1] is open, but not on the inode asked for (a descriptor number
  // reused since the registry named it): nothing is lent.
  errno = 0;
  EXPECT_EQ(sv::shm::borrow_fd(getpid(), fds_[1], inode_of(fds_[1]) + 1), -1);
  EXPECT_EQ(errno, EACCES);
  EXPECT_EQ(sv::shm::borrow_fd(getpid(), 100000, inode_of(fds_[1])), -1);  // not open at all
}

TEST_F(FdLender, NothingFromAProcessWithoutALender) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // a process of ours that never started a lender
    pause();
    _exit(0);
  }
  EXPECT_EQ(sv::shm::borrow_fd(child, 0, 0), -1);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
}

TEST_F(FdLender, AForkedChildLendsItsOwn) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  int to_parent[2];
  ASSERT_EQ(pipe(to_parent), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const bool started = sv::shm::start_fd_lender();  // a lender of its own, under its own pid
    char ok = started ? 1 : 0;
    (void)!write(to_parent[1], &ok, 1);
    pause();
    _exit(0);
  }
  char ok = 0;
  ASSERT_EQ(read(to_parent[0], &ok, 1), 1);
  EXPECT_EQ(ok, 1);
  // The child's copy of the pipe's write end: lent by the child.
  int got = sv::shm::borrow_fd(child, fds_[1], inode_of(fds_[1]));
  EXPECT_GE(got, 0) << strerror(errno);
  if (got >= 0) close(got);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  close(to_parent[0]);
  close(to_parent[1]);
}

}  // namespace
