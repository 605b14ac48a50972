// A peer's death is seen through its registry liveness lock (robust futex),
// whatever way it dies, and its slot becomes reusable.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "process_stacks.h"
#include "sanitizers.h"
#include "shm/host.h"

namespace sv::shm {
namespace {

// The child dies with the test, whichever way the test ends: a child left
// hung in its attach would hold the registry's lock, and every later
// process of this namespace would wait on it (the TSan job's next attach
// hung so in CI, after this test had given up on its child).
struct KilledAtExit {
  pid_t pid;
  void kill_now() {
    if (pid <= 0) return;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = 0;  // (reaped: its number may be another process's now)
  }
  ~KilledAtExit() { kill_now(); }
};

TEST(Liveness, KilledPeerIsSeenDead) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  Host* host = Host::get();
  ASSERT_NE(host, nullptr);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t child = fork();
  if (child == 0) {
    Host* h = Host::get();  // a fresh attachment in the child
    uint32_t slot = h ? h->slot() : 0;
    if (write(fds[1], &slot, sizeof slot) != sizeof slot) _exit(1);
    pause();
    _exit(0);
  }
  KilledAtExit reaper{child};
  uint32_t slot = 0;
  pollfd pfd{fds[0], POLLIN, 0};
  if (poll(&pfd, 1, 20000) != 1) {
    std::fprintf(stderr, "the child %d did not report its slot in 20 s; its threads:\n", child);
    test::print_process_stacks(child);
    FAIL() << "the child did not report its slot";
  }
  ASSERT_EQ(read(fds[0], &slot, sizeof slot), static_cast<ssize_t>(sizeof slot));
  ASSERT_NE(slot, 0u);
  ASSERT_NE(slot, host->slot());
  const Peer* peer = host->peers().get(slot);
  ASSERT_NE(peer, nullptr);
  EXPECT_TRUE(peer->alive());
  EXPECT_EQ(peer->pid, child);
  const uint32_t incarnation = peer->incarnation;
  reaper.kill_now();
  // Dead slots are reusable at once: another process (tests run in
  // parallel) may already own it again, under a new incarnation.
  const ProcSlot& ps = host->registry().proc(slot);
  EXPECT_TRUE(!proc_alive(ps) || ps.incarnation.load() != incarnation);
  const Peer* now = host->peers().get(slot);
  EXPECT_TRUE(now == nullptr || (now->incarnation != incarnation && now->pid != child));
  close(fds[0]);
  close(fds[1]);
}

}  // namespace
}  // namespace sv::shm
