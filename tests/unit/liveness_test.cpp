// A peer's death is seen through its registry liveness lock (robust futex),
// whatever way it dies, and its slot becomes reusable.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sanitizers.h"
#include "shm/host.h"

namespace sv::shm {
namespace {

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
  uint32_t slot = 0;
  pollfd pfd{fds[0], POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 10000), 1) << "the child did not report its slot";
  ASSERT_EQ(read(fds[0], &slot, sizeof slot), static_cast<ssize_t>(sizeof slot));
  ASSERT_NE(slot, 0u);
  ASSERT_NE(slot, host->slot());
  const Peer* peer = host->peers().get(slot);
  ASSERT_NE(peer, nullptr);
  EXPECT_TRUE(peer->alive());
  EXPECT_EQ(peer->pid, child);
  const uint32_t incarnation = peer->incarnation;
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
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
