// The validation layer (SOFTVERBS_CHECK, core/check.h), through the public
// verbs only. Each misuse below is one a device tolerates until it breaks;
// the CTest entries run this program with SOFTVERBS_CHECK=warn (each
// misuse reported, with this program as the call site), =abort (each test
// alone, check_abort.sh: the process ends at the misuse, SIGABRT) and off
// (nothing said: the checks are off by default).
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>

#include "verbs_fixture.h"

namespace {

std::string mode() {
  const char* v = std::getenv("SOFTVERBS_CHECK");
  return v ? v : "";
}

// What stderr showed while `misuse` ran; under abort mode, that it died
// with the report.
template <typename Fn>
void expect_report(const char* check, Fn misuse) {
  const std::string tag = std::string("check [") + check + "]";
  if (mode() == "abort") {  // (check_abort.sh runs each test alone and wants SIGABRT and the report)
    misuse();
    ADD_FAILURE() << "SOFTVERBS_CHECK=abort: still running after " << check;
    return;
  }
  testing::internal::CaptureStderr();
  misuse();
  const std::string err = testing::internal::GetCapturedStderr();
  if (mode() == "warn") {
    EXPECT_NE(err.find(tag), std::string::npos) << err;
    // The call site: this program, not softverbs' libraries.
    EXPECT_NE(err.find("called from softverbs_check_tests"), std::string::npos) << err;
  } else {
    EXPECT_EQ(err.find("check ["), std::string::npos) << "reported with the checks off: " << err;
  }
}

// Unsignaled WRITEs only: the queue fills and nothing will ever free it.
TEST(Check, ASendQueueOverrunByUnsignaledWorkRequests) {
  svtest::Device dev;
  svtest::QpPair pair(dev, IBV_QPT_RC, /*depth=*/4);
  svtest::Buffer local(dev.pd, 64), remote(dev.pd, 64);
  expect_report("sq-overrun", [&] {
    ibv_sge sge = local.sge(0, 8);
    ibv_send_wr wr = svtest::write_wr(&sge, remote, /*send_flags=*/0);
    ibv_send_wr* bad = nullptr;
    int rc = 0;
    for (int i = 0; i < 5 && rc == 0; ++i) rc = ibv_post_send(pair.a, &wr, &bad);
    EXPECT_EQ(rc, ENOMEM);  // (as without the check: the queue is full)
  });
}

// A QP whose send and receive queues can complete 256 work requests on a
// CQ of 16 entries.
TEST(Check, ACqSmallerThanWhatItsQpsCanComplete) {
  svtest::Device dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* qp = nullptr;
  expect_report("cq-too-small", [&] {
    qp = svtest::create_rc_qp(dev.pd, cq, /*depth=*/128);
    EXPECT_NE(qp, nullptr);  // (created all the same, as a device creates it)
  });
  if (qp) ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
}

// A completion event taken and never acknowledged: ibv_destroy_cq would
// wait for ever. (The event is acknowledged from another thread once the
// report is out, so the test ends.)
TEST(Check, DestroyingACqWithUnacknowledgedEvents) {
  svtest::Device dev;
  ibv_comp_channel* ch = ibv_create_comp_channel(dev.ctx);
  ASSERT_NE(ch, nullptr);
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, ch, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp* qp = svtest::create_rc_qp(dev.pd, cq, 4);
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(svtest::connect_qp(qp, qp->qp_num), 0);  // (a loopback to itself)
  ASSERT_EQ(ibv_req_notify_cq(cq, 0), 0);
  svtest::Buffer buf(dev.pd, 64);
  ibv_sge sge = buf.sge(0, 8);
  ibv_send_wr wr = svtest::write_wr(&sge, 1, buf.addr() + 32, buf.mr->rkey);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(qp, &wr, &bad), 0);
  ibv_cq* ev_cq = nullptr;
  void* ev_ctx = nullptr;
  ASSERT_EQ(ibv_get_cq_event(ch, &ev_cq, &ev_ctx), 0);
  ASSERT_EQ(svtest::poll_n(cq, 1).size(), 1u);
  ASSERT_EQ(ibv_destroy_qp(qp), 0);
  expect_report("unacked-events", [&] {
    std::thread acker([&] {
      usleep(300'000);
      ibv_ack_cq_events(cq, 1);
    });
    EXPECT_EQ(ibv_destroy_cq(cq), 0);
    acker.join();
  });
  ibv_destroy_comp_channel(ch);
}

// A SEND waits for a receive (RNR, retried for ever) while its MR is
// deregistered.
TEST(Check, DeregisteringAnMrAWorkRequestStillNames) {
  svtest::Device dev;
  svtest::QpPair pair(dev, IBV_QPT_RC);
  auto* local = new svtest::Buffer(dev.pd, 64);
  ibv_sge sge = local->sge(0, 8);
  ibv_send_wr wr{};
  wr.wr_id = 0x77;
  wr.opcode = IBV_WR_SEND;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.send_flags = IBV_SEND_SIGNALED;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(pair.a, &wr, &bad), 0);  // (b has no receive: RNR)
  expect_report("mr-in-use", [&] { EXPECT_EQ(ibv_dereg_mr(local->mr), 0); });
  local->mr = nullptr;
  delete local;
}

// fork() while an MR is registered, and ibv_fork_init() never called.
TEST(Check, ForkWithRegisteredMemoryAndNoForkInit) {
  svtest::Device dev;
  svtest::Buffer buf(dev.pd, 4096);
  expect_report("fork-without-fork-init", [] {
    const pid_t child = fork();
    if (child == 0) _exit(0);
    int status = 0;
    waitpid(child, &status, 0);
  });
}

// A CQ created single-threaded, polled by a second thread while the first
// is inside ibv_start_poll .. ibv_end_poll.
TEST(Check, ASingleThreadedCqPolledByTwoThreads) {
  svtest::Device dev;
  ibv_cq_init_attr_ex attr{};
  attr.cqe = 16;
  attr.wc_flags = IBV_WC_STANDARD_FLAGS;
  attr.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
  attr.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
  ibv_cq_ex* cqx = ibv_create_cq_ex(dev.ctx, &attr);
  ASSERT_NE(cqx, nullptr);
  ibv_cq* cq = ibv_cq_ex_to_cq(cqx);
  ibv_qp* qp = svtest::create_rc_qp(dev.pd, cq, 4);
  ASSERT_NE(qp, nullptr);
  ASSERT_EQ(svtest::connect_qp(qp, qp->qp_num), 0);  // (a loopback to itself)
  svtest::Buffer buf(dev.pd, 64);
  ibv_sge sge = buf.sge(0, 8);
  ibv_send_wr wr = svtest::write_wr(&sge, 1, buf.addr() + 32, buf.mr->rkey);
  ibv_send_wr* bad = nullptr;
  for (int i = 0; i < 2; ++i) ASSERT_EQ(ibv_post_send(qp, &wr, &bad), 0);  // (two: one stays for the second thread)
  ibv_poll_cq_attr pattr{};
  int rc;
  while ((rc = ibv_start_poll(cqx, &pattr)) == ENOENT) {
  }
  ASSERT_EQ(rc, 0);
  expect_report("single-thread-cq", [&] {
    std::atomic<bool> polling{false};
    std::thread second([&] {
      polling = true;
      ibv_wc wc;
      (void)ibv_poll_cq(cq, 1, &wc);  // waits for the first thread's ibv_end_poll
    });
    while (!polling) std::this_thread::yield();
    usleep(300'000);  // (the second thread is in ibv_poll_cq by now)
    ibv_end_poll(cqx);
    second.join();
  });
  ibv_destroy_qp(qp);
  ibv_destroy_cq(cq);
}

// A WRITE's buffer written after the post and before its completion was
// polled; then, after the poll, written again: that one is fine.
TEST(Check, ABufferWrittenBeforeItsWorkRequestCompleted) {
  svtest::Device dev;
  svtest::QpPair pair(dev, IBV_QPT_RC);
  svtest::Buffer local(dev.pd, 64), remote(dev.pd, 64);
  ibv_sge sge = local.sge(0, 8);
  ibv_send_wr wr = svtest::write_wr(&sge, remote);
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(ibv_post_send(pair.a, &wr, &bad), 0);
  local.bytes[3] ^= 0xff;  // too early
  expect_report("buffer-reused", [&] { EXPECT_EQ(svtest::poll_n(pair.cq_a, 1).size(), 1u); });
  ASSERT_EQ(ibv_post_send(pair.a, &wr, &bad), 0);
  EXPECT_EQ(svtest::poll_n(pair.cq_a, 1).size(), 1u);
  local.bytes[3] ^= 0xff;  // in time: its completion came
  testing::internal::CaptureStderr();
  ASSERT_EQ(ibv_post_send(pair.a, &wr, &bad), 0);
  EXPECT_EQ(svtest::poll_n(pair.cq_a, 1).size(), 1u);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("check ["), std::string::npos) << err;
}

// The same fork, after ibv_fork_init(): nothing to say. (Last: the call
// cannot be undone.)
TEST(Check, ZForkAfterForkInitIsFine) {
  svtest::Device dev;
  svtest::Buffer buf(dev.pd, 4096);
  ASSERT_EQ(ibv_fork_init(), 0);
  testing::internal::CaptureStderr();
  const pid_t child = fork();
  if (child == 0) _exit(0);
  int status = 0;
  waitpid(child, &status, 0);
  const std::string err = testing::internal::GetCapturedStderr();
  EXPECT_EQ(err.find("check ["), std::string::npos) << err;
}

}  // namespace
