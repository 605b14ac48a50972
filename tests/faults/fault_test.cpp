// Faults on demand (SOFTVERBS_FAULTS, core/faults.h), through the public
// verbs only. Each CTest entry (faults_*) runs one of these tests with the
// rules it is about in its environment (tests/faults/CMakeLists.txt).
#include <gtest/gtest.h>
#include <infiniband/verbs.h>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "verbs_fixture.h"

namespace {

// call=ibv_reg_mr,errno=ENOMEM,nth=3: the third registration fails, alone.
TEST(Faults, TheNthCallFailsWithTheChosenErrno) {
  svtest::Device dev;
  static char buf[4][4096];
  std::vector<int> errs;
  for (auto& b : buf) {
    errno = 0;
    ibv_mr* mr = ibv_reg_mr(dev.pd, b, sizeof b, IBV_ACCESS_LOCAL_WRITE);
    errs.push_back(mr ? 0 : errno);
    if (mr) ibv_dereg_mr(mr);
  }
  EXPECT_EQ(errs, (std::vector<int>{0, 0, ENOMEM, 0}));
}

// call=ibv_create_qp,errno=EAGAIN,every=2: every second one.
TEST(Faults, EveryNthCallFails) {
  svtest::Device dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 8, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  std::vector<int> errs;
  for (int i = 0; i < 4; ++i) {
    errno = 0;
    ibv_qp* qp = svtest::create_rc_qp(dev.pd, cq);
    errs.push_back(qp ? 0 : errno);
    if (qp) ibv_destroy_qp(qp);
  }
  EXPECT_EQ(errs, (std::vector<int>{0, EAGAIN, 0, EAGAIN}));
  ibv_destroy_cq(cq);
}

// wc=RETRY_EXC_ERR,opcode=RDMA_WRITE,nth=3: the third WRITE completes with
// the status, the QP goes to ERR and what follows is flushed, as after a
// device's own error; SENDs do not count.
TEST(Faults, TheNthWorkRequestCompletesWithTheChosenStatusAndTheQpFails) {
  svtest::Device dev;
  svtest::QpPair pair(dev, IBV_QPT_RC);
  svtest::Buffer local(dev.pd, 64), remote(dev.pd, 64);
  auto post = [&](ibv_wr_opcode op, uint64_t id) {
    ibv_sge sge = local.sge(0, 8);
    ibv_send_wr wr = svtest::write_wr(&sge, 1, remote.addr(), remote.mr->rkey, IBV_SEND_SIGNALED, id);
    wr.opcode = op;  // (a SEND ignores the remote address)
    ibv_send_wr* bad = nullptr;
    return ibv_post_send(pair.a, &wr, &bad);
  };
  ibv_recv_wr rwr{};
  ibv_sge rsge = remote.sge(0, 64);
  rwr.sg_list = &rsge;
  rwr.num_sge = 1;
  ibv_recv_wr* rbad = nullptr;
  ASSERT_EQ(ibv_post_recv(pair.b, &rwr, &rbad), 0);
  ASSERT_EQ(post(IBV_WR_SEND, 0), 0);
  for (uint64_t id = 1; id <= 4; ++id) ASSERT_EQ(post(IBV_WR_RDMA_WRITE, id), 0);
  std::vector<ibv_wc> wcs = svtest::poll_n(pair.cq_a, 5);
  ASSERT_EQ(wcs.size(), 5u);
  const ibv_wc_status want[] = {IBV_WC_SUCCESS, IBV_WC_SUCCESS, IBV_WC_SUCCESS, IBV_WC_RETRY_EXC_ERR,
                                IBV_WC_WR_FLUSH_ERR};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(wcs[i].wr_id, i);
    EXPECT_EQ(wcs[i].status, want[i]) << "wr " << i << ": " << ibv_wc_status_str(wcs[i].status);
  }
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ASSERT_EQ(ibv_query_qp(pair.a, &attr, IBV_QP_STATE, &init), 0);
  EXPECT_EQ(attr.qp_state, IBV_QPS_ERR);
}

// An RC pair in one process and an 8-byte RDMA WRITE from a's buffer to
// b's: what the fault rules below act on.
class FaultsOnAWrite : public ::testing::Test {
 protected:
  // The WRITE, posted and waited for: its status.
  ibv_wc_status write() { return svtest::post_and_wait(pair.a, pair.cq_a, wr); }
  // The next async event of the context (acknowledged).
  ibv_async_event next_event() {
    ibv_async_event ev{};
    EXPECT_EQ(ibv_get_async_event(dev.ctx, &ev), 0);
    ibv_ack_async_event(&ev);
    return ev;
  }
  ibv_qp_state state_of(ibv_qp* qp) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    EXPECT_EQ(ibv_query_qp(qp, &attr, IBV_QP_STATE, &init), 0);
    return attr.qp_state;
  }
  svtest::Device dev;
  svtest::QpPair pair{dev, IBV_QPT_RC};
  svtest::Buffer local{dev.pd, 64}, remote{dev.pd, 64};
  ibv_sge sge = local.sge(0, 8);
  ibv_send_wr wr = svtest::write_wr(&sge, remote);
};

// call=ibv_post_send,errno=ENOMEM,nth=2: the post fails, *bad names the
// work request, nothing of it runs.
TEST_F(FaultsOnAWrite, APostThatFailsNamesItsWorkRequest) {
  EXPECT_EQ(write(), IBV_WC_SUCCESS);
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(ibv_post_send(pair.a, &wr, &bad), ENOMEM);
  EXPECT_EQ(bad, &wr);
  EXPECT_TRUE(svtest::poll_n(pair.cq_a, 1, 100).empty());
  EXPECT_EQ(write(), IBV_WC_SUCCESS);
}

// event=QP_FATAL,nth=2: at the second post, IBV_EVENT_QP_FATAL for the QP,
// which is then in ERR: what was posted completes flushed.
TEST_F(FaultsOnAWrite, AnAsyncEventOnDemand) {
  EXPECT_EQ(write(), IBV_WC_SUCCESS);
  EXPECT_EQ(write(), IBV_WC_WR_FLUSH_ERR);
  const ibv_async_event ev = next_event();
  EXPECT_EQ(ev.event_type, IBV_EVENT_QP_FATAL);
  EXPECT_EQ(ev.element.qp, pair.a);
  EXPECT_EQ(state_of(pair.a), IBV_QPS_ERR);
}

// event=CQ_ERR,nth=1: IBV_EVENT_CQ_ERR for the QP's send CQ, the QP in
// ERR, as after an overrun.
TEST_F(FaultsOnAWrite, ACqErrorOnDemand) {
  EXPECT_EQ(write(), IBV_WC_WR_FLUSH_ERR);
  const ibv_async_event ev = next_event();
  EXPECT_EQ(ev.event_type, IBV_EVENT_CQ_ERR);
  EXPECT_EQ(ev.element.cq, pair.cq_a);
}

// late=200,opcode=RDMA_WRITE,nth=2: the second WRITE completes 200 ms
// late, and the third, posted with it, after it: in order, as a NIC's.
TEST(Faults, AWorkRequestCompletesLate) {
  svtest::Device dev;
  svtest::QpPair pair(dev, IBV_QPT_RC);
  svtest::Buffer local(dev.pd, 64), remote(dev.pd, 64);
  ibv_sge sge = local.sge(0, 8);
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t id = 1; id <= 3; ++id) {
    ibv_send_wr wr = svtest::write_wr(&sge, 1, remote.addr(), remote.mr->rkey, IBV_SEND_SIGNALED, id);
    ibv_send_wr* bad = nullptr;
    ASSERT_EQ(ibv_post_send(pair.a, &wr, &bad), 0);
  }
  std::vector<std::pair<uint64_t, double>> done;  // wr_id, ms since the posts
  while (done.size() < 3 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5)) {
    ibv_wc wc;
    if (ibv_poll_cq(pair.cq_a, 1, &wc) == 1) {
      EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
      done.emplace_back(wc.wr_id, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].first, 1u);
  EXPECT_LT(done[0].second, 150.0);  // (on time)
  EXPECT_EQ(done[1].first, 2u);
  EXPECT_GE(done[1].second, 200.0);
  EXPECT_EQ(done[2].first, 3u);
  EXPECT_GE(done[2].second, done[1].second);
}

// event=DEVICE_FATAL,nth=2: at the second post, IBV_EVENT_DEVICE_FATAL;
// every QP of the context is in ERR (the WRITE posted flushed), and what
// needs the device fails with EIO, as after a driver's teardown.
TEST_F(FaultsOnAWrite, ADeviceFatalErrorOnDemand) {
  EXPECT_EQ(write(), IBV_WC_SUCCESS);
  EXPECT_EQ(write(), IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(next_event().event_type, IBV_EVENT_DEVICE_FATAL);
  EXPECT_EQ(state_of(pair.a), IBV_QPS_ERR);
  EXPECT_EQ(state_of(pair.b), IBV_QPS_ERR);  // (it never posted)
  errno = 0;
  EXPECT_EQ(ibv_alloc_pd(dev.ctx), nullptr);
  EXPECT_EQ(errno, EIO);
  static char more[4096];
  errno = 0;
  EXPECT_EQ(ibv_reg_mr(dev.pd, more, sizeof more, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EIO);
}

}  // namespace

namespace {

// The output of a command.
std::string output_of(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[512];
    while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
    pclose(p);
  }
  return out;
}

// No rules at the start: softverbs-stat -p PID -f puts one in force in
// this running process (its next post takes it), shows it and its count,
// and -f "" takes it away again.
TEST(Faults, SwitchedOnAndOffFromOutsideAndCounted) {
  const char* stat = std::getenv("SOFTVERBS_STAT_TOOL");
  ASSERT_NE(stat, nullptr) << "SOFTVERBS_STAT_TOOL: the softverbs-stat binary";
  svtest::Device dev;
  svtest::QpPair pair(dev, IBV_QPT_RC);
  svtest::Buffer local(dev.pd, 64), remote(dev.pd, 64);
  ibv_sge sge = local.sge(0, 8);
  ibv_send_wr wr = svtest::write_wr(&sge, remote);
  EXPECT_EQ(svtest::post_and_wait(pair.a, pair.cq_a, wr), IBV_WC_SUCCESS);
  const std::string me = std::to_string(getpid());
  EXPECT_EQ(output_of(std::string(stat) + " -p " + me).find("faults"), std::string::npos);  // none in force yet

  const std::string set = output_of(std::string(stat) + " -p " + me + " -f 'wc=REM_ACCESS_ERR,opcode=RDMA_WRITE,nth=2'");
  EXPECT_NE(set.find("in force from its next verbs call"), std::string::npos) << set;  // (we were in popen: no call)
  EXPECT_EQ(svtest::post_and_wait(pair.a, pair.cq_a, wr), IBV_WC_SUCCESS);
  EXPECT_EQ(svtest::post_and_wait(pair.a, pair.cq_a, wr), IBV_WC_REM_ACCESS_ERR);  // the second WRITE since
  const std::string shown = output_of(std::string(stat) + " -p " + me);
  EXPECT_NE(shown.find("faults     injected 1 rules 'wc=REM_ACCESS_ERR,opcode=RDMA_WRITE,nth=2' status generation 1: "
                       "1 rules in force"),
            std::string::npos)
      << shown;

  // Off again: a new pair of QPs runs clean.
  output_of(std::string(stat) + " -p " + me + " -f ''");
  svtest::QpPair clean(dev, IBV_QPT_RC);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(svtest::post_and_wait(clean.a, clean.cq_a, wr), IBV_WC_SUCCESS);
  EXPECT_NE(output_of(std::string(stat) + " -p " + me).find("status generation 2: 0 rules in force"), std::string::npos);

  // Rules that do not parse are refused by the tool, and nothing changes.
  const std::string bad = output_of(std::string(stat) + " -p " + me + " -f 'wc=SOMETIMES' 2>&1");
  EXPECT_NE(bad.find("no completion status 'SOMETIMES'"), std::string::npos) << bad;
}

}  // namespace

namespace {

// port=down,after=0.3,for=0.4: the port goes down 0.3 s in (PORT_ERR, its
// state DOWN) and comes back 0.4 s later (PORT_ACTIVE, ACTIVE), with no
// verbs call from the application meanwhile.
TEST(Faults, ThePortGoesDownAndComesBack) {
  svtest::Device dev;
  ibv_port_attr port{};
  ASSERT_EQ(ibv_query_port(dev.ctx, 1, &port), 0);
  EXPECT_EQ(port.state, IBV_PORT_ACTIVE);
  ibv_async_event ev{};
  ASSERT_EQ(ibv_get_async_event(dev.ctx, &ev), 0);  // (blocks until it comes)
  EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ERR);
  EXPECT_EQ(ev.element.port_num, 1);
  ibv_ack_async_event(&ev);
  ASSERT_EQ(ibv_query_port(dev.ctx, 1, &port), 0);
  EXPECT_EQ(port.state, IBV_PORT_DOWN);
  ASSERT_EQ(ibv_get_async_event(dev.ctx, &ev), 0);
  EXPECT_EQ(ev.event_type, IBV_EVENT_PORT_ACTIVE);
  ibv_ack_async_event(&ev);
  ASSERT_EQ(ibv_query_port(dev.ctx, 1, &port), 0);
  EXPECT_EQ(port.state, IBV_PORT_ACTIVE);
}

}  // namespace
