// Between processes: fork()ed children open their own device context after
// the fork and talk to the parent over RC; a child asleep in
// ibv_get_cq_event costs no CPU; a peer that is SIGKILLed makes the
// survivor's sends fail with IBV_WC_RETRY_EXC_ERR instead of hanging; and
// registered memory keeps fork's copy semantics.
//
// Children report through pipes and exit codes (_exit, never gtest). Every
// wait of the parent has a timeout, and a child still running when its
// test ends is SIGKILLed.
#include <fcntl.h>
#include <sched.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "sanitizers.h"
#include "verbs_fixture.h"
#include "verbs_test_util.h"

using namespace svtest;
using namespace svtest::util;

namespace {

struct Pipe {
  int fd[2] = {-1, -1};
  Pipe() {
    if (pipe2(fd, O_CLOEXEC)) fd[0] = fd[1] = -1;
  }
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) close(f);
  }
  int r() const { return fd[0]; }
  int w() const { return fd[1]; }
  // The parent closes the ends only the child uses, so a child's death is
  // an immediate EOF rather than a timeout.
  void close_r() {
    if (fd[0] >= 0) close(fd[0]);
    fd[0] = -1;
  }
  void close_w() {
    if (fd[1] >= 0) close(fd[1]);
    fd[1] = -1;
  }
};

bool write_all(int fd, const void* p, size_t n) {
  auto* c = static_cast<const char*>(p);
  while (n) {
    ssize_t k = write(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= size_t(k);
  }
  return true;
}

// Reads exactly n bytes, or fails after timeout_ms.
bool read_all(int fd, void* p, size_t n, int timeout_ms) {
  auto* c = static_cast<char*>(p);
  uint64_t deadline = mono_ns() + uint64_t(timeout_ms) * 1000000ull;
  while (n) {
    int left = int((deadline - std::min(deadline, mono_ns())) / 1000000ull);
    if (left <= 0 || !readable(fd, left)) return false;
    ssize_t k = read(fd, c, n);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) return false;
    c += k;
    n -= size_t(k);
  }
  return true;
}

template <class T>
bool send_msg(int fd, const T& v) {
  return write_all(fd, &v, sizeof v);
}
template <class T>
bool recv_msg(int fd, T* v, int timeout_ms = 3000) {
  return read_all(fd, v, sizeof *v, timeout_ms);
}

// A forked child running `body` (its return value is the exit code).
class Child {
 public:
  template <class F>
  explicit Child(F&& body) {
    fflush(nullptr);
    pid_ = fork();
    if (pid_ == 0) {
      int rc = 90;
      try {
        rc = body();
      } catch (...) {
        rc = 91;
      }
      _exit(rc);
    }
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  pid_t pid() const { return pid_; }
  bool started() const { return pid_ > 0; }

  // Exit code; 128+signal if killed; -1 if still running after timeout_ms
  // (it is then killed). Once reaped, returns the same code again.
  int wait(int timeout_ms) {
    if (pid_ <= 0) return -2;
    if (reaped_) return code_;
    code_ = reap(timeout_ms);
    return code_;
  }

 private:
  int reap(int timeout_ms) {
    uint64_t deadline = mono_ns() + uint64_t(timeout_ms) * 1000000ull;
    for (;;) {
      int st = 0;
      pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        reaped_ = true;
        if (WIFEXITED(st)) return WEXITSTATUS(st);
        if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
        return -3;
      }
      if (r < 0) return -4;
      if (mono_ns() > deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, nullptr, 0);
        reaped_ = true;
        return -1;
      }
      usleep(2000);
    }
  }

  pid_t pid_ = -1;
  bool reaped_ = false;
  int code_ = -5;
};

struct Hello {
  uint32_t qpn = 0;
};

// utime + stime (clock ticks) and state of a process, from /proc/<pid>/stat.
bool proc_cpu(pid_t pid, uint64_t* ticks, char* state) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(f, line)) return false;
  size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream in(line.substr(close + 2));
  std::vector<std::string> tok;
  std::string t;
  while (in >> t) tok.push_back(t);
  if (tok.size() < 13) return false;
  *state = tok[0][0];                                        // field 3
  *ticks = std::stoull(tok[11]) + std::stoull(tok[12]);      // fields 14, 15
  return true;
}

// The child's side of an RC connection to the parent. Returns 0 or a step number.
struct ChildRc {
  Device dev;
  ibv_comp_channel* ch = nullptr;
  ibv_cq* cq = nullptr;
  ibv_qp* qp = nullptr;
  int setup(const Pipe& to_parent, const Pipe& to_child, bool with_channel) {
    if (with_channel && !(ch = ibv_create_comp_channel(dev.ctx))) return 1;
    cq = ibv_create_cq(dev.ctx, 16, nullptr, ch, 0);
    if (!cq) return 2;
    qp = create_qp(dev.pd, IBV_QPT_RC, cq, cq);
    if (!qp) return 3;
    if (!send_msg(to_parent.w(), Hello{qp->qp_num})) return 4;
    Hello peer;
    if (!recv_msg(to_child.r(), &peer)) return 5;
    if (connect_qp(qp, peer.qpn)) return 6;
    return 0;
  }
};

// ================================================================ tests

TEST(MultiProcess, RcSendBothDirections) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  Device dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* qp = create_qp(dev.pd, IBV_QPT_RC, cq, cq);
  ASSERT_NE(qp, nullptr);
  Buffer sbuf(dev.pd, 8192), rbuf(dev.pd, 8192);
  Pipe to_child, to_parent;
  Child child([&]() -> int {
    ChildRc c;
    if (int e = c.setup(to_parent, to_child, false)) return 10 + e;
    Buffer rb(c.dev.pd, 8192), sb(c.dev.pd, 8192);
    if (post_recv(c.qp, 1, rb.sge(0, 8192))) return 20;
    if (!send_msg(to_parent.w(), 'R')) return 21;
    auto r = wait_wc(c.cq, 1, 3000);
    if (r.size() != 1 || r[0].status != IBV_WC_SUCCESS) return 22;
    if (r[0].byte_len != 8192 || !has_pattern(rb.bytes.data(), 8192, 101)) return 23;
    fill_pattern(sb.bytes.data(), 8192, 102);
    ibv_sge s = sb.sge(0, 8192);
    ibv_send_wr wr = make_wr(2, &s, 1);
    if (post_send(c.qp, &wr)) return 24;
    auto sc = wait_wc(c.cq, 1, 3000);
    if (sc.size() != 1 || sc[0].status != IBV_WC_SUCCESS) return 25;
    return 0;
  });
  ASSERT_TRUE(child.started());
  to_parent.close_w();
  to_child.close_r();
  Hello peer;
  ASSERT_TRUE(recv_msg(to_parent.r(), &peer)) << "child did not report its QPN (exit " << child.wait(100) << ")";
  ASSERT_TRUE(send_msg(to_child.w(), Hello{qp->qp_num}));
  ASSERT_EQ(connect_qp(qp, peer.qpn), 0);
  ASSERT_EQ(post_recv(qp, 3, rbuf.sge(0, 8192)), 0);
  char ready = 0;
  ASSERT_TRUE(recv_msg(to_parent.r(), &ready)) << "child not ready (exit " << child.wait(100) << ")";
  ASSERT_EQ(ready, 'R');
  fill_pattern(sbuf.bytes.data(), 8192, 101);
  ibv_sge s = sbuf.sge(0, 8192);
  ibv_send_wr wr = make_wr(4, &s, 1);
  ASSERT_EQ(post_send(qp, &wr), 0);
  auto w = wait_wc(cq, 2, 3000);  // our send, then the child's message
  ASSERT_EQ(w.size(), 2u);
  for (auto& c : w) EXPECT_EQ(c.status, IBV_WC_SUCCESS) << "wr " << c.wr_id << ": " << ibv_wc_status_str(c.status);
  const ibv_wc& rc = w[0].wr_id == 3 ? w[0] : w[1];
  EXPECT_EQ(rc.wr_id, 3u);
  EXPECT_EQ(rc.byte_len, 8192u);
  EXPECT_EQ(rc.src_qp, peer.qpn);
  EXPECT_TRUE(has_pattern(rbuf.bytes.data(), 8192, 102));
  EXPECT_EQ(child.wait(3000), 0) << "child failed (see the step codes in the test)";
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
}

TEST(MultiProcess, ChildAsleepInGetCqEventUsesNoCpuAndWakes) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  Device dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* qp = create_qp(dev.pd, IBV_QPT_RC, cq, cq);
  ASSERT_NE(qp, nullptr);
  Buffer sbuf(dev.pd, 256);
  Pipe to_child, to_parent;
  Child child([&]() -> int {
    ChildRc c;
    if (int e = c.setup(to_parent, to_child, true)) return 10 + e;
    Buffer rb(c.dev.pd, 256);
    if (post_recv(c.qp, 1, rb.sge(0, 256))) return 20;
    if (ibv_req_notify_cq(c.cq, 0)) return 21;
    if (!send_msg(to_parent.w(), 'R')) return 22;
    ibv_cq* ev = nullptr;
    void* ctx = nullptr;
    if (ibv_get_cq_event(c.ch, &ev, &ctx)) return 23;  // blocks until the parent sends
    if (ev != c.cq) return 24;
    ibv_ack_cq_events(ev, 1);
    auto r = wait_wc(c.cq, 1, 1000);
    if (r.size() != 1 || r[0].status != IBV_WC_SUCCESS || !has_pattern(rb.bytes.data(), 100, 103)) return 25;
    if (!send_msg(to_parent.w(), 'W')) return 26;
    return 0;
  });
  ASSERT_TRUE(child.started());
  to_parent.close_w();
  to_child.close_r();
  Hello peer;
  ASSERT_TRUE(recv_msg(to_parent.r(), &peer)) << "child exit " << child.wait(100);
  ASSERT_TRUE(send_msg(to_child.w(), Hello{qp->qp_num}));
  ASSERT_EQ(connect_qp(qp, peer.qpn), 0);
  char ready = 0;
  ASSERT_TRUE(recv_msg(to_parent.r(), &ready)) << "child exit " << child.wait(100);
  ASSERT_EQ(ready, 'R');

  sleep_ms(50);  // let it reach ibv_get_cq_event
  uint64_t t0 = 0, t1 = 0;
  char st0 = '?', st1 = '?';
  ASSERT_TRUE(proc_cpu(child.pid(), &t0, &st0));
  uint64_t w0 = mono_ns();
  sleep_ms(500);
  ASSERT_TRUE(proc_cpu(child.pid(), &t1, &st1));
  double wall_s = double(mono_ns() - w0) / 1e9;
  double cpu_s = double(t1 - t0) / double(sysconf(_SC_CLK_TCK));
  EXPECT_LT(cpu_s / wall_s, 0.10) << "the waiting child used " << cpu_s * 1000 << " ms of CPU in " << wall_s * 1000
                                  << " ms";
  EXPECT_EQ(st1, 'S') << "the waiting child should be asleep";

  fill_pattern(sbuf.bytes.data(), 256, 103);
  ibv_sge s = sbuf.sge(0, 100);
  ibv_send_wr wr = make_wr(1, &s, 1);
  uint64_t sent = mono_ns();
  ASSERT_EQ(post_send(qp, &wr), 0);
  auto sc = wait_wc(cq, 1, 2000);
  ASSERT_EQ(sc.size(), 1u);
  EXPECT_EQ(sc[0].status, IBV_WC_SUCCESS);
  char woke = 0;
  EXPECT_TRUE(recv_msg(to_parent.r(), &woke, 2000)) << "the child did not wake up";
  EXPECT_EQ(woke, 'W');
  EXPECT_LT(ms_since(sent), 1000.0);
  EXPECT_EQ(child.wait(2000), 0);
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
}

// The survivor of a SIGKILLed peer: with timeout 10 (4.096 us * 2^10 = 4.2
// ms) and retry_cnt 2, a send completes with IBV_WC_RETRY_EXC_ERR after
// about 3 timeouts (12.6 ms). Generous bound: 250 ms. Never a hang.
TEST(MultiProcess, KilledPeerGivesRetryExceeded) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  struct Case {
    const char* name;
    bool first_send_delivered;  // else: the send is waiting on RNR when the peer dies
  } cases[] = {{"kill_then_send", true}, {"kill_during_rnr_wait", false}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.name);
    Device dev;
    ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
    ASSERT_NE(cq, nullptr);
    ibv_qp* qp = create_qp(dev.pd, IBV_QPT_RC, cq, cq);
    ASSERT_NE(qp, nullptr);
    Buffer sbuf(dev.pd, 256);
    Pipe to_child, to_parent;
    const bool post = k.first_send_delivered;
    Child child([&]() -> int {
      ChildRc c;
      if (int e = c.setup(to_parent, to_child, false)) return 10 + e;
      Buffer rb(c.dev.pd, 256);
      if (post && post_recv(c.qp, 1, rb.sge(0, 256))) return 20;
      if (!send_msg(to_parent.w(), 'R')) return 21;
      for (int i = 0; i < 1000; ++i) usleep(10000);  // until killed (10 s at most)
      return 0;
    });
    ASSERT_TRUE(child.started());
    to_parent.close_w();
    to_child.close_r();
    Hello peer;
    ASSERT_TRUE(recv_msg(to_parent.r(), &peer)) << "child exit " << child.wait(100);
    ASSERT_TRUE(send_msg(to_child.w(), Hello{qp->qp_num}));
    RcOpts o;
    o.timeout = 10;
    o.retry_cnt = 2;
    o.rnr_retry = 7;  // an RNR never ends the wait: only the peer's death can
    ASSERT_EQ(connect_with(qp, peer.qpn, o), 0);
    char ready = 0;
    ASSERT_TRUE(recv_msg(to_parent.r(), &ready)) << "child exit " << child.wait(100);

    ibv_sge s = sbuf.sge(0, 64);
    ibv_send_wr wr = make_wr(1, &s, 1);
    ASSERT_EQ(post_send(qp, &wr), 0);
    if (k.first_send_delivered) {
      auto w = wait_wc(cq, 1, 2000);
      ASSERT_EQ(w.size(), 1u);
      ASSERT_EQ(w[0].status, IBV_WC_SUCCESS) << ibv_wc_status_str(w[0].status);
    } else {
      EXPECT_TRUE(drain(cq, 50).empty()) << "completed although the peer posted no receive";
    }
    ASSERT_EQ(kill(child.pid(), SIGKILL), 0);
    EXPECT_EQ(child.wait(2000), 128 + SIGKILL);
    uint64_t t0 = mono_ns();
    if (k.first_send_delivered) {
      ibv_send_wr wr2 = make_wr(2, &s, 1);
      ASSERT_EQ(post_send(qp, &wr2), 0);
    }
    auto w = wait_wc(cq, 1, 3000);
    double ms = ms_since(t0);
    ASSERT_EQ(w.size(), 1u) << "no completion within 3 s of the peer's death";
    EXPECT_EQ(w[0].status, IBV_WC_RETRY_EXC_ERR) << ibv_wc_status_str(w[0].status);
    EXPECT_EQ(w[0].wr_id, k.first_send_delivered ? 2u : 1u);
    EXPECT_LT(ms, 250.0) << "implied by timeout 10 / retry_cnt 2: about 12.6 ms";
    EXPECT_EQ(qp_state(qp), IBV_QPS_ERR);
    ibv_destroy_qp(qp);
    ibv_destroy_cq(cq);
  }
}

// Registered memory keeps fork()'s copy semantics: neither process sees the
// other's writes, and the parent's MR keeps working.
TEST(MultiProcess, ForkKeepsRegisteredMemoryPrivate) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  Device dev;
  QpPair p(dev, IBV_QPT_RC);
  constexpr size_t N = 3 * 4096;
  auto* heap = static_cast<uint8_t*>(std::malloc(N));
  ASSERT_NE(heap, nullptr);
  fill_pattern(heap, N, 110);
  ibv_mr* mr = ibv_reg_mr(dev.pd, heap + 100, N - 200,
                          IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
  ASSERT_NE(mr, nullptr);
  Pipe to_child, to_parent;
  // Parent and child on one CPU: the parent runs first after fork() (CFS
  // default), so its writes below surely happen before the child is
  // scheduled. With correct fork semantics the child sees the fork-time
  // content regardless of ordering; this only makes a violation reliable
  // to observe.
  cpu_set_t saved, one;
  bool pinned = sched_getaffinity(0, sizeof saved, &saved) == 0;
  if (pinned) {
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    pinned = sched_setaffinity(0, sizeof one, &one) == 0;
  }
  Child child([&]() -> int {
    char go = 0;
    if (!recv_msg(to_child.r(), &go)) return 10;
    // Its copy, as of the fork.
    if (has_pattern(heap, N, 112)) return 11;  // the parent's post-fork writes
    if (!has_pattern(heap, N, 110)) return 14;  // something else (a mix?)
    fill_pattern(heap, N, 111);
    if (!has_pattern(heap, N, 111)) return 12;
    if (!send_msg(to_parent.w(), 'D')) return 13;
    return 0;
  });
  ASSERT_TRUE(child.started());
  to_parent.close_w();
  to_child.close_r();
  // Keep writing for a while after fork() returned: whenever the child
  // takes its copy, it must be the fork-time content.
  for (uint64_t t0 = mono_ns(); mono_ns() - t0 < 20'000'000ull;) fill_pattern(heap, N, 112);
  if (pinned) sched_setaffinity(0, sizeof saved, &saved);
  ASSERT_TRUE(send_msg(to_child.w(), 'G'));
  char done = 0;
  EXPECT_TRUE(recv_msg(to_parent.r(), &done)) << "child exit " << child.wait(100);
  int code = child.wait(2000);
  EXPECT_EQ(code, 0) << (code == 11   ? "the child saw the parent's writes made after fork() returned"
                         : code == 14 ? "the child's copy matches neither the fork-time content nor the "
                                        "parent's later writes"
                                      : "child failed");
  EXPECT_TRUE(has_pattern(heap, N, 112)) << "the parent sees the child's writes";
  // The parent's MR still reaches the parent's memory.
  Buffer dst(dev.pd, 4096);
  ASSERT_EQ(post_recv(p.b, 1, dst.sge(0, 4096)), 0);
  ibv_sge s{reinterpret_cast<uint64_t>(heap) + 1000, 4096, mr->lkey};
  ASSERT_EQ(send_a_to_b(p, 2, &s, 1), 0);
  auto sc = wait_wc(p.cq_a, 1), rc = wait_wc(p.cq_b, 1);
  ASSERT_EQ(sc.size(), 1u);
  ASSERT_EQ(rc.size(), 1u);
  EXPECT_EQ(rc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(dst.bytes.data(), heap + 1000, 4096), 0);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  std::free(heap);
}

// Children forked after the parent opened the device use the parent's
// context, as rdma-core's test_multi_process_alloc_dm does on mlx5: each
// allocates device memory at the same moment, copies through it, makes a
// PD, an MR and a CQ, and the parent's context goes on working. (The
// children crashed on the parent's unmapped arena; the parent waited for
// their results forever.)
TEST(MultiProcess, ForkChildrenUseTheParentsContext) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  Device dev;
  ibv_device_attr_ex attr{};
  ASSERT_EQ(ibv_query_device_ex(dev.ctx, nullptr, &attr), 0);
  ASSERT_GT(attr.max_dm_size, 0u);
  const uint64_t size = attr.max_dm_size / 2 / 5 & ~uint64_t{3};
  std::vector<std::unique_ptr<Child>> kids;
  for (int i = 0; i < 5; ++i) {
    kids.push_back(std::make_unique<Child>([&, i]() -> int {
      ibv_alloc_dm_attr a{};
      a.length = size;
      ibv_dm* dm = ibv_alloc_dm(dev.ctx, &a);
      if (!dm) return 10 + (errno & 63);
      std::vector<uint8_t> in(size), out(size);
      fill_pattern(in.data(), size, static_cast<uint8_t>(i));
      if (ibv_memcpy_to_dm(dm, 0, in.data(), size) || ibv_memcpy_from_dm(out.data(), dm, 0, size)) return 80;
      if (in != out) return 81;
      ibv_pd* pd = ibv_alloc_pd(dev.ctx);
      if (!pd) return 82;
      ibv_mr* mr = ibv_reg_mr(pd, in.data(), size, IBV_ACCESS_LOCAL_WRITE);
      ibv_cq* cq = ibv_create_cq(dev.ctx, 4, nullptr, nullptr, 0);
      if (!mr || !cq) return 83;
      if (ibv_destroy_cq(cq) || ibv_dereg_mr(mr) || ibv_dealloc_pd(pd) || ibv_free_dm(dm)) return 84;
      return 0;
    }));
  }
  for (auto& k : kids) {
    ASSERT_TRUE(k->started());
    EXPECT_EQ(k->wait(20000), 0) << "child exit code (10+errno: alloc failed; 128+signal: killed)";
  }
  ibv_alloc_dm_attr a{};
  a.length = 4096;
  ibv_dm* dm = ibv_alloc_dm(dev.ctx, &a);
  ASSERT_NE(dm, nullptr) << "the parent's context after its children";
  EXPECT_EQ(ibv_free_dm(dm), 0);
}

}  // namespace
