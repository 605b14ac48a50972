// The connection manager through its public API: events, connection
// set-up and tear-down, private data, errors users meet, and
// rdma_create_qp as its man page says. Both ends live in this process
// (or a forked child) and talk through the intra-host rendezvous.
#include <gtest/gtest.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <rdma/rdma_verbs.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <set>
#include <thread>
#include <cstring>
#include <string>
#include <vector>

#include "sanitizers.h"

namespace {

// Ports that nobody listens on, for the tests of what a request to such a
// port gets. Listeners bind port 0, a port the CM picks (32768-60999): the
// ASan and the TSan builds of this binary run side by side in CI, and a
// listening port both chose would put one's client in the other's listener.
std::atomic<uint16_t> next_port{static_cast<uint16_t>(21000 + (getpid() % 2000) * 4)};

sockaddr_in loopback(uint16_t port) {
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  sin.sin_port = htons(port);
  return sin;
}

// The channel's next event within `ms`, or null (errno EAGAIN: none came).
// Non-blocking while it waits: the channel's fd can be readable with no
// event to come of it (the link timer's tick), and a blocking
// rdma_get_cm_event would then wait past the deadline for one that never
// comes.
rdma_cm_event* event_within(rdma_event_channel* ch, int ms) {
  const int flags = fcntl(ch->fd, F_GETFL);
  fcntl(ch->fd, F_SETFL, flags | O_NONBLOCK);
  rdma_cm_event* ev = nullptr;
  int got = -1;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);;) {
    got = rdma_get_cm_event(ch, &ev);
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (got == 0 || errno != EAGAIN || left.count() <= 0) break;
    pollfd pfd{ch->fd, POLLIN, 0};
    poll(&pfd, 1, static_cast<int>(left.count()));
  }
  const int err = errno;
  fcntl(ch->fd, F_SETFL, flags);
  errno = err;
  return got == 0 ? ev : nullptr;
}

// Waits (up to 5 s) for the next event on `ch`; fails the test if it is
// not `expected`. The caller acks.
rdma_cm_event* expect_event(rdma_event_channel* ch, rdma_cm_event_type expected) {
  rdma_cm_event* ev = event_within(ch, 5000);
  if (!ev && errno == EAGAIN) {
    ADD_FAILURE() << "no event within 5 s, wanted " << rdma_event_str(expected);
    return nullptr;
  }
  if (!ev) {
    ADD_FAILURE() << "rdma_get_cm_event: " << strerror(errno);
    return nullptr;
  }
  EXPECT_EQ(ev->event, expected) << rdma_event_str(ev->event) << " status " << ev->status;
  return ev;
}

void ack_expected(rdma_event_channel* ch, rdma_cm_event_type expected) {
  if (rdma_cm_event* ev = expect_event(ch, expected)) rdma_ack_cm_event(ev);
}

// Gives `id` a device as a client's id gets one: its address resolved
// towards 127.0.0.1 (binding to 127.0.0.1 alone attaches none, as the
// classic rdma_cm; CmBind.LoopbackBindsWithoutADevice).
void attach_device(rdma_event_channel* ch, rdma_cm_id* id) {
  sockaddr_in dst = loopback(7);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0) << strerror(errno);
  ack_expected(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_NE(id->verbs, nullptr);
}

struct Listener {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  uint16_t port = 0;
  explicit Listener(rdma_port_space ps = RDMA_PS_TCP) {
    EXPECT_EQ(rdma_create_id(ch, &id, nullptr, ps), 0);
    sockaddr_in addr = loopback(0);
    EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&addr)), 0);
    port = ntohs(rdma_get_src_port(id));
    EXPECT_NE(port, 0);
    EXPECT_EQ(rdma_listen(id, 8), 0);
  }
  ~Listener() {
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
  }
};

// An id bound to 127.0.0.1 and a port of its own that does not listen (yet).
struct BoundOnly {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  uint16_t port = 0;
  BoundOnly() {
    EXPECT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
    sockaddr_in addr = loopback(0);
    EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&addr)), 0);
    port = ntohs(rdma_get_src_port(id));
  }
  ~BoundOnly() {
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
  }
};

// An id on `ch` with its route resolved towards 127.0.0.1:port.
rdma_cm_id* resolved_id(rdma_event_channel* ch, uint16_t port, rdma_port_space ps = RDMA_PS_TCP) {
  rdma_cm_id* id = nullptr;
  EXPECT_EQ(rdma_create_id(ch, &id, nullptr, ps), 0);
  sockaddr_in dst = loopback(port);
  EXPECT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  ack_expected(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_EQ(rdma_resolve_route(id, 2000), 0);
  ack_expected(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
  return id;
}

// An active id with its route resolved towards 127.0.0.1:port, on a
// channel of its own.
struct Client {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  Client(uint16_t port, rdma_port_space ps = RDMA_PS_TCP) : id(resolved_id(ch, port, ps)) {}
  ~Client() {
    if (id->qp) rdma_destroy_qp(id);
    rdma_destroy_id(id);
    rdma_destroy_event_channel(ch);
  }
};

ibv_qp_init_attr small_qp(ibv_qp_type type = IBV_QPT_RC) {
  ibv_qp_init_attr attr{};
  attr.qp_type = type;
  attr.cap.max_send_wr = 4;
  attr.cap.max_recv_wr = 4;
  attr.cap.max_send_sge = 1;
  attr.cap.max_recv_sge = 1;
  return attr;
}

ibv_qp_state qp_state(ibv_qp* qp) {
  ibv_qp_attr attr{};
  ibv_qp_init_attr init{};
  ibv_query_qp(qp, &attr, IBV_QP_STATE, &init);
  return attr.qp_state;
}

TEST(CmChannel, FdIsPollableAndHonoursNonBlocking) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  ASSERT_EQ(fcntl(ch->fd, F_SETFL, fcntl(ch->fd, F_GETFL) | O_NONBLOCK), 0);
  rdma_cm_event* ev = nullptr;
  EXPECT_EQ(rdma_get_cm_event(ch, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);
  pollfd pfd{ch->fd, POLLIN, 0};
  EXPECT_EQ(poll(&pfd, 1, 0), 0);

  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = loopback(7174);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  EXPECT_EQ(poll(&pfd, 1, 1000), 1);
  ASSERT_EQ(rdma_get_cm_event(ch, &ev), 0);
  EXPECT_EQ(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
  EXPECT_EQ(ev->id, id);
  EXPECT_NE(id->verbs, nullptr);
  EXPECT_NE(id->pd, nullptr);
  EXPECT_NE(rdma_get_src_port(id), 0);
  EXPECT_EQ(rdma_get_dst_port(id), htons(7174));
  rdma_ack_cm_event(ev);
  EXPECT_EQ(poll(&pfd, 1, 0), 0);  // nothing left: the fd is quiet again
  EXPECT_EQ(rdma_destroy_id(id), 0);
  rdma_destroy_event_channel(ch);
}

TEST(CmConnect, NobodyListeningIsRejectedNotAHang) {
  Client client(next_port++);
  ibv_qp_init_attr attr = small_qp();
  ASSERT_EQ(rdma_create_qp(client.id, nullptr, &attr), 0);
  ASSERT_EQ(rdma_connect(client.id, nullptr), 0);
  rdma_cm_event* ev = expect_event(client.ch, RDMA_CM_EVENT_REJECTED);
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(ev->status, 8);  // IB CM: invalid service ID
  rdma_ack_cm_event(ev);
}

// qperf's server binds port 0, tells the client its port over TCP and only
// then calls rdma_listen: the REQ may come first. On a NIC resolution is
// slow enough to hide it; here the REQ waits for the listener (as long as
// one REQ of the kernel's CM waits for an answer), however late the
// listener comes within that time. About half of qperf's runs failed with
// "Event rejected" beside two busy loops.
TEST(CmConnect, ReqWaitsForABoundPortToListen) {
  for (int delay_ms : {0, 50, 1500}) {
    SCOPED_TRACE(delay_ms);
    BoundOnly server;
    Client client(server.port);
    ibv_qp_init_attr attr = small_qp();
    ASSERT_EQ(rdma_create_qp(client.id, nullptr, &attr), 0);
    ASSERT_EQ(rdma_connect(client.id, nullptr), 0);
    // The server as qperf's: listens late, then accepts. The client waits
    // for its answer meanwhile, as clients do (its channel makes progress).
    rdma_cm_id* child = nullptr;
    std::thread serve([&] {
      usleep(delay_ms * 1000);
      ASSERT_EQ(rdma_listen(server.id, 8), 0);
      rdma_cm_event* req = expect_event(server.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
      ASSERT_NE(req, nullptr);
      child = req->id;
      rdma_ack_cm_event(req);
      ibv_qp_init_attr child_attr = small_qp();
      ASSERT_EQ(rdma_create_qp(child, nullptr, &child_attr), 0);
      rdma_conn_param accept{};
      accept.responder_resources = accept.initiator_depth = 1;
      ASSERT_EQ(rdma_accept(child, &accept), 0);
      ack_expected(server.ch, RDMA_CM_EVENT_ESTABLISHED);
    });
    ack_expected(client.ch, RDMA_CM_EVENT_ESTABLISHED);
    serve.join();
    ASSERT_NE(child, nullptr);
    rdma_disconnect(client.id);
    rdma_destroy_qp(child);
    rdma_destroy_id(child);
  }
}

// A port nobody binds is still rejected at once (not after the wait for a
// listener), and one that is bound but never listens is rejected when the
// wait ends, with the same reason.
TEST(CmConnect, ReqToAPortNobodyHoldsIsRejectedAtOnce) {
  Client nobody(next_port++);
  ibv_qp_init_attr attr = small_qp();
  ASSERT_EQ(rdma_create_qp(nobody.id, nullptr, &attr), 0);
  ASSERT_EQ(rdma_connect(nobody.id, nullptr), 0);
  pollfd pfd{nobody.ch->fd, POLLIN, 0};
  EXPECT_EQ(poll(&pfd, 1, 1000), 1) << "no answer within 1 s: the REQ waited for a listener nobody can start";
  rdma_cm_event* ev = expect_event(nobody.ch, RDMA_CM_EVENT_REJECTED);
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(ev->status, 8);
  rdma_ack_cm_event(ev);

  BoundOnly server;
  Client late(server.port);
  ASSERT_EQ(rdma_create_qp(late.id, nullptr, &attr), 0);
  ASSERT_EQ(rdma_connect(late.id, nullptr), 0);
  pollfd lfd{late.ch->fd, POLLIN, 0};
  ASSERT_EQ(poll(&lfd, 1, 10000), 1) << "a REQ to a port that never listens must end";
  ev = expect_event(late.ch, RDMA_CM_EVENT_REJECTED);
  ASSERT_NE(ev, nullptr);
  EXPECT_EQ(ev->status, 8);
  rdma_ack_cm_event(ev);
}

TEST(CmConnect, ConnectAcceptExchangeAndDisconnect) {
  Listener listener;
  Client client(listener.port);
  ibv_qp_init_attr attr = small_qp();
  ASSERT_EQ(rdma_create_qp(client.id, nullptr, &attr), 0);
  EXPECT_EQ(qp_state(client.id->qp), IBV_QPS_INIT);

  const char hello[] = "hello from the client";
  rdma_conn_param param{};
  param.private_data = hello;
  param.private_data_len = sizeof hello;
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = 7;
  param.rnr_retry_count = 7;
  ASSERT_EQ(rdma_connect(client.id, &param), 0);

  rdma_cm_event* req = expect_event(listener.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->listen_id, listener.id);
  EXPECT_GE(req->param.conn.private_data_len, sizeof hello);
  EXPECT_STREQ(static_cast<const char*>(req->param.conn.private_data), hello);
  EXPECT_EQ(req->param.conn.qp_num, client.id->qp->qp_num);
  rdma_cm_id* child = req->id;
  EXPECT_NE(child->verbs, nullptr);
  EXPECT_EQ(rdma_get_src_port(child), htons(listener.port));
  rdma_ack_cm_event(req);

  ibv_qp_init_attr child_attr = small_qp();
  ASSERT_EQ(rdma_create_qp(child, nullptr, &child_attr), 0);
  ASSERT_NE(child->recv_cq, nullptr);
  ASSERT_NE(child->recv_cq_channel, nullptr);
  char buf[64] = {};
  ibv_mr* mr = ibv_reg_mr(child->pd, buf, sizeof buf, IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr);
  ASSERT_EQ(rdma_post_recv(child, nullptr, buf, sizeof buf, mr), 0);  // at once, in INIT

  const char welcome[] = "welcome";
  rdma_conn_param accept{};
  accept.private_data = welcome;
  accept.private_data_len = sizeof welcome;
  accept.responder_resources = 1;
  accept.initiator_depth = 1;
  ASSERT_EQ(rdma_accept(child, &accept), 0);

  rdma_cm_event* est = expect_event(client.ch, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_NE(est, nullptr);
  EXPECT_STREQ(static_cast<const char*>(est->param.conn.private_data), welcome);
  rdma_ack_cm_event(est);
  EXPECT_EQ(qp_state(client.id->qp), IBV_QPS_RTS);
  ack_expected(listener.ch, RDMA_CM_EVENT_ESTABLISHED);

  char msg[] = "data over the connection";
  ibv_mr* smr = ibv_reg_mr(client.id->pd, msg, sizeof msg, 0);
  ASSERT_NE(smr, nullptr);
  ASSERT_EQ(rdma_post_send(client.id, nullptr, msg, sizeof msg, smr, IBV_SEND_SIGNALED), 0);
  ibv_wc wc{};
  ASSERT_EQ(rdma_get_send_comp(client.id, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  ASSERT_EQ(rdma_get_recv_comp(child, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  EXPECT_STREQ(buf, msg);

  ASSERT_EQ(rdma_disconnect(client.id), 0);
  ack_expected(client.ch, RDMA_CM_EVENT_DISCONNECTED);
  ack_expected(listener.ch, RDMA_CM_EVENT_DISCONNECTED);
  EXPECT_EQ(qp_state(client.id->qp), IBV_QPS_ERR);
  EXPECT_EQ(rdma_disconnect(child), 0);

  ibv_dereg_mr(smr);
  ibv_dereg_mr(mr);
  rdma_destroy_qp(child);
  EXPECT_EQ(rdma_destroy_id(child), 0);
}

// retry_count and rnr_retry_count are 3-bit fields of the REQ/REP: the
// kernel's rdma_cm takes min(7, value). libfabric's verbs provider asks for
// retry_count 15; the server's QP must still reach RTS (fi_accept failed
// with EINVAL when 15 reached ibv_modify_qp).
TEST(CmConnect, RetryCountsAboveSevenMeanSeven) {
  Listener listener;
  Client client(listener.port);
  ibv_qp_init_attr attr = small_qp();
  ASSERT_EQ(rdma_create_qp(client.id, nullptr, &attr), 0);
  rdma_conn_param param{};
  param.responder_resources = 1;
  param.initiator_depth = 1;
  param.retry_count = 15;
  param.rnr_retry_count = 8;
  ASSERT_EQ(rdma_connect(client.id, &param), 0) << strerror(errno);
  rdma_cm_event* req = expect_event(listener.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->param.conn.retry_count, 7);
  EXPECT_EQ(req->param.conn.rnr_retry_count, 7);
  rdma_cm_id* child = req->id;
  rdma_ack_cm_event(req);
  ibv_qp_init_attr child_attr = small_qp();
  ASSERT_EQ(rdma_create_qp(child, nullptr, &child_attr), 0);
  rdma_conn_param accept{};
  accept.responder_resources = 1;
  accept.initiator_depth = 1;
  accept.rnr_retry_count = 255;
  ASSERT_EQ(rdma_accept(child, &accept), 0) << strerror(errno);
  ack_expected(client.ch, RDMA_CM_EVENT_ESTABLISHED);
  ack_expected(listener.ch, RDMA_CM_EVENT_ESTABLISHED);
  for (ibv_qp* qp : {client.id->qp, child->qp}) {
    ibv_qp_attr got{};
    ibv_qp_init_attr init{};
    ASSERT_EQ(ibv_query_qp(qp, &got, IBV_QP_STATE | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY, &init), 0);
    EXPECT_EQ(got.qp_state, IBV_QPS_RTS);
    EXPECT_EQ(got.retry_cnt, 7);
    EXPECT_EQ(got.rnr_retry, 7);
  }
  rdma_disconnect(client.id);
  rdma_destroy_qp(child);
  rdma_destroy_id(child);
}

TEST(CmConnect, RejectCarriesReasonAndPrivateData) {
  Listener listener;
  Client client(listener.port);
  ibv_qp_init_attr attr = small_qp();
  ASSERT_EQ(rdma_create_qp(client.id, nullptr, &attr), 0);
  ASSERT_EQ(rdma_connect(client.id, nullptr), 0);
  rdma_cm_event* req = expect_event(listener.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  rdma_cm_id* child = req->id;
  rdma_ack_cm_event(req);
  const char why[] = "go away";
  EXPECT_EQ(rdma_reject(child, why, 149), -1);  // over the REJ limit
  EXPECT_EQ(errno, EINVAL);
  ASSERT_EQ(rdma_reject(child, why, sizeof why), 0);
  rdma_cm_event* rej = expect_event(client.ch, RDMA_CM_EVENT_REJECTED);
  ASSERT_NE(rej, nullptr);
  EXPECT_EQ(rej->status, 28);  // consumer defined
  EXPECT_STREQ(static_cast<const char*>(rej->param.conn.private_data), why);
  rdma_ack_cm_event(rej);
  EXPECT_EQ(rdma_destroy_id(child), 0);
}

TEST(CmConnect, PrivateDataLimits) {
  Client client(next_port++);
  ibv_qp_init_attr attr = small_qp();
  ASSERT_EQ(rdma_create_qp(client.id, nullptr, &attr), 0);
  char big[200] = {};
  rdma_conn_param param{};
  param.private_data = big;
  param.private_data_len = 57;  // REQ carries 56 after the rdma_cm header
  EXPECT_EQ(rdma_connect(client.id, &param), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST(CmConnect, PeerProcessDeathGivesDisconnected) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  Listener listener;
  pid_t child_pid = fork();
  ASSERT_GE(child_pid, 0);
  if (child_pid == 0) {
    // The client: connect, wait for ESTABLISHED, die without a word.
    rdma_event_channel* ch = rdma_create_event_channel();
    rdma_cm_id* id = nullptr;
    rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP);
    sockaddr_in dst = loopback(listener.port);
    rdma_cm_event* ev = nullptr;
    if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000) ||
        rdma_get_cm_event(ch, &ev))
      _exit(2);
    rdma_ack_cm_event(ev);
    if (rdma_resolve_route(id, 2000) || rdma_get_cm_event(ch, &ev)) _exit(3);
    rdma_ack_cm_event(ev);
    ibv_qp_init_attr attr = small_qp();
    if (rdma_create_qp(id, nullptr, &attr) || rdma_connect(id, nullptr)) _exit(4);
    if (rdma_get_cm_event(ch, &ev) || ev->event != RDMA_CM_EVENT_ESTABLISHED) _exit(5);
    _exit(0);
  }
  rdma_cm_event* req = expect_event(listener.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  rdma_cm_id* child = req->id;
  rdma_ack_cm_event(req);
  ibv_qp_init_attr attr = small_qp();
  ASSERT_EQ(rdma_create_qp(child, nullptr, &attr), 0);
  ASSERT_EQ(rdma_accept(child, nullptr), 0);
  ack_expected(listener.ch, RDMA_CM_EVENT_ESTABLISHED);
  // Heard before the child is reaped: a zombie keeps its pid, but its
  // mailbox's name went with its sockets (cm_link.h's liveness check).
  ack_expected(listener.ch, RDMA_CM_EVENT_DISCONNECTED);
  int status = 0;
  waitpid(child_pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  rdma_destroy_qp(child);
  rdma_destroy_id(child);
}

TEST(CmCreateQp, NeedsABoundIdAndCleansUpOnError) {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  ibv_qp_init_attr attr = small_qp();
  EXPECT_EQ(rdma_create_qp(id, nullptr, &attr), -1);  // not bound to a device
  EXPECT_EQ(errno, EINVAL);
  attach_device(ch, id);
  attr.cap.max_send_wr = 1u << 30;  // more than the device has
  EXPECT_EQ(rdma_create_qp(id, nullptr, &attr), -1);
  EXPECT_EQ(id->qp, nullptr);
  EXPECT_EQ(id->send_cq, nullptr);  // nothing half-created
  EXPECT_EQ(id->recv_cq, nullptr);
  EXPECT_EQ(id->send_cq_channel, nullptr);
  attr = small_qp();
  attr.cap.max_send_wr = 3;
  ASSERT_EQ(rdma_create_qp(id, nullptr, &attr), 0);
  EXPECT_GE(attr.cap.max_send_wr, 3u);  // rounded up and written back
  EXPECT_EQ(attr.send_cq, id->send_cq);
  EXPECT_EQ(id->qp->pd, id->pd);  // the id's default PD
  EXPECT_EQ(rdma_create_qp(id, nullptr, &attr), -1);  // one QP per id
  rdma_destroy_qp(id);
  EXPECT_EQ(id->qp, nullptr);
  EXPECT_EQ(id->send_cq, nullptr);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

TEST(CmCreateQp, SrqOfTheIdIsUsedByItsQp) {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  attach_device(ch, id);
  ibv_srq_init_attr srq_attr{};
  srq_attr.attr.max_wr = 8;
  srq_attr.attr.max_sge = 1;
  ASSERT_EQ(rdma_create_srq(id, nullptr, &srq_attr), 0);
  ASSERT_NE(id->srq, nullptr);
  ibv_qp_init_attr attr = small_qp();
  ASSERT_EQ(rdma_create_qp(id, nullptr, &attr), 0);
  EXPECT_EQ(id->qp->srq, id->srq);
  rdma_destroy_qp(id);
  rdma_destroy_srq(id);
  EXPECT_EQ(id->srq, nullptr);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

// An XRC SRQ asked of an id without a domain or CQ gets the device's domain
// and a receive CQ of the id, as librdmacm gives them.
TEST(CmCreateQp, XrcSrqGetsTheDevicesDomainAndAReceiveCq) {
  rdma_event_channel* ch = rdma_create_event_channel();
  ASSERT_NE(ch, nullptr);
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  attach_device(ch, id);
  ibv_srq_init_attr_ex xrc{};
  xrc.comp_mask = IBV_SRQ_INIT_ATTR_TYPE;
  xrc.srq_type = IBV_SRQT_XRC;
  xrc.attr.max_wr = 4;
  xrc.attr.max_sge = 1;
  ASSERT_EQ(rdma_create_srq_ex(id, &xrc), 0) << strerror(errno);
  ASSERT_NE(id->srq, nullptr);
  EXPECT_NE(id->recv_cq, nullptr);
  EXPECT_NE(xrc.xrcd, nullptr);
  EXPECT_EQ(xrc.cq, id->recv_cq);
  uint32_t srqn = 0;
  EXPECT_EQ(ibv_get_srq_num(id->srq, &srqn), 0);
  EXPECT_NE(srqn, 0u);
  rdma_destroy_srq(id);
  EXPECT_EQ(id->srq, nullptr);
  EXPECT_EQ(id->recv_cq, nullptr);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

TEST(CmConnect, EceTravelsWithTheRequest) {
  Listener listener;
  Client client(listener.port);
  ibv_qp_init_attr attr = small_qp();
  ASSERT_EQ(rdma_create_qp(client.id, nullptr, &attr), 0);
  ibv_ece ece{0x15b3, 0x5, 0};
  ASSERT_EQ(rdma_set_local_ece(client.id, &ece), 0);
  ASSERT_EQ(rdma_connect(client.id, nullptr), 0);
  rdma_cm_event* req = expect_event(listener.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  ibv_ece remote{};
  ASSERT_EQ(rdma_get_remote_ece(req->id, &remote), 0);
  EXPECT_EQ(remote.vendor_id, 0x15b3u);
  EXPECT_EQ(remote.options, 0x5u);
  rdma_cm_id* child = req->id;
  rdma_ack_cm_event(req);
  ASSERT_EQ(rdma_reject_ece(child, nullptr, 0), 0);
  rdma_cm_event* rej = expect_event(client.ch, RDMA_CM_EVENT_REJECTED);
  ASSERT_NE(rej, nullptr);
  EXPECT_EQ(rej->status, 35);  // vendor option not supported
  rdma_ack_cm_event(rej);
  rdma_destroy_id(child);
}

TEST(CmCreateQp, UdQpCanSendAtOnce) {
  Client client(next_port++, RDMA_PS_UDP);
  ibv_qp_init_attr attr = small_qp(IBV_QPT_UD);
  ASSERT_EQ(rdma_create_qp(client.id, nullptr, &attr), 0);
  EXPECT_EQ(qp_state(client.id->qp), IBV_QPS_RTS);
  ibv_qp_attr qattr{};
  ibv_qp_init_attr init{};
  ibv_query_qp(client.id->qp, &qattr, IBV_QP_QKEY, &init);
  EXPECT_EQ(qattr.qkey, static_cast<uint32_t>(RDMA_UDP_QKEY));
}

TEST(CmUd, SidrResolvesTheServerQp) {
  Listener listener(RDMA_PS_UDP);
  Client client(listener.port, RDMA_PS_UDP);
  ibv_qp_init_attr attr = small_qp(IBV_QPT_UD);
  ASSERT_EQ(rdma_create_qp(client.id, nullptr, &attr), 0);
  ASSERT_EQ(rdma_connect(client.id, nullptr), 0);
  rdma_cm_event* req = expect_event(listener.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  rdma_cm_id* child = req->id;
  rdma_ack_cm_event(req);
  ibv_qp_init_attr child_attr = small_qp(IBV_QPT_UD);
  ASSERT_EQ(rdma_create_qp(child, nullptr, &child_attr), 0);
  ASSERT_EQ(rdma_accept(child, nullptr), 0);
  rdma_cm_event* est = expect_event(client.ch, RDMA_CM_EVENT_ESTABLISHED);
  ASSERT_NE(est, nullptr);
  EXPECT_EQ(est->param.ud.qp_num, child->qp->qp_num);
  EXPECT_EQ(est->param.ud.qkey, static_cast<uint32_t>(RDMA_UDP_QKEY));
  EXPECT_EQ(est->param.ud.ah_attr.is_global, 1);
  rdma_ack_cm_event(est);
  rdma_destroy_qp(child);
  rdma_destroy_id(child);
}

TEST(CmOptions, TosAndAckTimeoutReachTheQpAttributes) {
  Client client(next_port++);
  uint8_t tos = 32, timeout = 12;
  EXPECT_EQ(rdma_set_option(client.id, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos), 0);
  EXPECT_EQ(rdma_set_option(client.id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
                            sizeof timeout), 0);
  EXPECT_EQ(rdma_set_option(client.id, RDMA_OPTION_ID, 99, &tos, sizeof tos), -1);
  EXPECT_EQ(errno, EOPNOTSUPP);
  ibv_qp_attr attr{};
  int mask = 0;
  attr.qp_state = IBV_QPS_RTR;  // not connected yet: nothing to say
  EXPECT_EQ(rdma_init_qp_attr(client.id, &attr, &mask), -1);
  EXPECT_EQ(errno, EINVAL);
  attr.qp_state = IBV_QPS_INIT;
  ASSERT_EQ(rdma_init_qp_attr(client.id, &attr, &mask), 0);
  EXPECT_TRUE(mask & IBV_QP_PORT);
  EXPECT_EQ(attr.port_num, 1);
}

TEST(CmId, DestroyWithUnretrievedEventsReturns) {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = loopback(7174);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  EXPECT_EQ(rdma_destroy_id(id), 0);  // the queued ADDR_RESOLVED goes with it
  ASSERT_EQ(fcntl(ch->fd, F_SETFL, O_NONBLOCK), 0);
  rdma_cm_event* ev = nullptr;
  EXPECT_EQ(rdma_get_cm_event(ch, &ev), -1);
  EXPECT_EQ(errno, EAGAIN);
  rdma_destroy_event_channel(ch);
}

TEST(CmId, MigrateMovesQueuedEvents) {
  rdma_event_channel* a = rdma_create_event_channel();
  rdma_event_channel* b = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(a, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst = loopback(7174);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  ASSERT_EQ(rdma_migrate_id(id, b), 0);
  EXPECT_EQ(id->channel, b);
  ack_expected(b, RDMA_CM_EVENT_ADDR_RESOLVED);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(a);
  rdma_destroy_event_channel(b);
}

// A synchronous id (created without a channel) keeps its last event until
// the next call; migrating it to a channel acks that event, as rdma-core
// does, instead of waiting for the user to ack an event it never saw
// (libfabric's verbs provider resolves with rdma_create_ep, then migrates:
// fi_pingpong -e msg hung here).
TEST(CmId, MigratingASynchronousIdDoesNotWaitForItsOwnEvent) {
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(nullptr, &id, nullptr, RDMA_PS_TCP), 0);
  EXPECT_EQ(rdma_migrate_id(id, nullptr), -1) << "a synchronous id already has its own channel";
  EXPECT_EQ(errno, EINVAL);
  sockaddr_in dst = loopback(7175);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0) << strerror(errno);
  ASSERT_NE(id->event, nullptr) << "a synchronous call leaves its event in id->event";
  rdma_event_channel* ch = rdma_create_event_channel();
  std::atomic<bool> returned{false};
  std::thread migrate([&] {
    EXPECT_EQ(rdma_migrate_id(id, ch), 0) << strerror(errno);
    returned = true;
  });
  for (int i = 0; i < 200 && !returned; ++i) usleep(10000);
  EXPECT_TRUE(returned) << "rdma_migrate_id waited for an event the user never retrieved";
  if (!returned) {
    rdma_ack_cm_event(id->event);  // lets the thread end so the test can
    id->event = nullptr;
  }
  migrate.join();
  EXPECT_EQ(id->channel, ch);
  EXPECT_EQ(id->event, nullptr);
  // The id is asynchronous now: its next event comes on the channel.
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0) << strerror(errno);
  ack_expected(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

TEST(CmId, BindConflictsAndBadPortSpace) {
  Listener listener;
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(listener.ch, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in addr = loopback(listener.port);
  EXPECT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&addr)), -1);
  EXPECT_EQ(errno, EADDRINUSE);
  rdma_destroy_id(id);
  EXPECT_EQ(rdma_create_id(listener.ch, &id, nullptr, static_cast<rdma_port_space>(0x999)), -1);
  EXPECT_EQ(errno, EINVAL);
}

TEST(CmResolve, AddressElsewhereResolvesWithARouteOrIsUnreachable) {
  // A documentation address (TEST-NET-2): with a route it resolves at once
  // (the kernel resolves the next hop when the first packet leaves; no
  // packet is sent here, and rdma_connect is not called); without one it
  // fails at once. Either way, no hang.
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in dst{};
  dst.sin_family = AF_INET;
  dst.sin_addr.s_addr = htonl(0xc6336407);  // 198.51.100.7
  dst.sin_port = htons(7174);
  if (rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 200) == 0) {
    rdma_cm_event* ev = expect_event(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
    ASSERT_NE(ev, nullptr);
    EXPECT_EQ(ev->status, 0);
    rdma_ack_cm_event(ev);
    ASSERT_EQ(rdma_resolve_route(id, 200), 0);
    ev = expect_event(ch, RDMA_CM_EVENT_ROUTE_RESOLVED);
    ASSERT_NE(ev, nullptr);
    ASSERT_NE(id->route.path_rec, nullptr);
    EXPECT_EQ(id->route.path_rec->dgid.raw[15], 7);  // ::ffff:198.51.100.7
    rdma_ack_cm_event(ev);
  } else {
    EXPECT_TRUE(errno == ENETUNREACH || errno == ENODEV) << strerror(errno);
  }
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

TEST(CmConnect, Ipv6LoopbackReachesADualStackListener) {
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* listen_id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &listen_id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in6 any{};
  any.sin6_family = AF_INET6;
  ASSERT_EQ(rdma_bind_addr(listen_id, reinterpret_cast<sockaddr*>(&any)), 0);
  const uint16_t port = ntohs(rdma_get_src_port(listen_id));
  ASSERT_EQ(rdma_listen(listen_id, 4), 0);

  rdma_event_channel* cch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(cch, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in6 dst{};
  dst.sin6_family = AF_INET6;
  dst.sin6_addr = in6addr_loopback;
  dst.sin6_port = htons(port);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  ack_expected(cch, RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_EQ(rdma_resolve_route(id, 2000), 0);
  ack_expected(cch, RDMA_CM_EVENT_ROUTE_RESOLVED);
  ibv_qp_init_attr attr = small_qp();
  ASSERT_EQ(rdma_create_qp(id, nullptr, &attr), 0);
  ASSERT_EQ(rdma_connect(id, nullptr), 0);
  rdma_cm_event* req = expect_event(ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  rdma_cm_id* child = req->id;
  EXPECT_EQ(rdma_get_peer_addr(child)->sa_family, AF_INET6);
  rdma_ack_cm_event(req);
  ibv_qp_init_attr child_attr = small_qp();
  ASSERT_EQ(rdma_create_qp(child, nullptr, &child_attr), 0);
  ASSERT_EQ(rdma_accept(child, nullptr), 0);
  ack_expected(cch, RDMA_CM_EVENT_ESTABLISHED);
  ack_expected(ch, RDMA_CM_EVENT_ESTABLISHED);
  rdma_destroy_qp(child);
  rdma_destroy_id(child);  // the peer sees DISCONNECTED
  ack_expected(cch, RDMA_CM_EVENT_DISCONNECTED);
  rdma_destroy_qp(id);
  rdma_destroy_id(id);
  rdma_destroy_id(listen_id);
  rdma_destroy_event_channel(cch);
  rdma_destroy_event_channel(ch);
}

TEST(CmEndpoint, SynchronousCreateEpGetRequestAcceptConnect) {
  rdma_addrinfo hints{};
  hints.ai_flags = RAI_PASSIVE;
  hints.ai_port_space = RDMA_PS_TCP;
  rdma_addrinfo* res = nullptr;
  ASSERT_EQ(rdma_getaddrinfo("127.0.0.1", "0", &hints, &res), 0);
  ibv_qp_init_attr attr = small_qp();
  attr.sq_sig_all = 1;
  rdma_cm_id* listen_id = nullptr;
  ASSERT_EQ(rdma_create_ep(&listen_id, res, nullptr, &attr), 0);
  rdma_freeaddrinfo(res);
  const std::string port = std::to_string(ntohs(rdma_get_src_port(listen_id)));
  ASSERT_EQ(rdma_listen(listen_id, 1), 0);

  std::thread server([&] {
    rdma_cm_id* id = nullptr;
    ASSERT_EQ(rdma_get_request(listen_id, &id), 0);
    ASSERT_NE(id->qp, nullptr);  // created from the endpoint's attributes
    char buf[16] = {};
    ibv_mr* mr = rdma_reg_msgs(id, buf, sizeof buf);
    ASSERT_EQ(rdma_post_recv(id, nullptr, buf, sizeof buf, mr), 0);
    ASSERT_EQ(rdma_accept(id, nullptr), 0);  // returns once ESTABLISHED
    ibv_wc wc{};
    ASSERT_EQ(rdma_get_recv_comp(id, &wc), 1);
    EXPECT_STREQ(buf, "sync hello");
    rdma_disconnect(id);
    rdma_dereg_mr(mr);
    rdma_destroy_ep(id);
  });

  hints.ai_flags = 0;
  ASSERT_EQ(rdma_getaddrinfo("127.0.0.1", port.c_str(), &hints, &res), 0);
  rdma_cm_id* id = nullptr;
  attr = small_qp();
  attr.sq_sig_all = 1;
  ASSERT_EQ(rdma_create_ep(&id, res, nullptr, &attr), 0);
  rdma_freeaddrinfo(res);
  char msg[16] = "sync hello";
  ibv_mr* mr = rdma_reg_msgs(id, msg, sizeof msg);
  ASSERT_EQ(rdma_connect(id, nullptr), 0);  // returns once ESTABLISHED
  ASSERT_EQ(rdma_post_send(id, nullptr, msg, sizeof msg, mr, 0), 0);
  ibv_wc wc{};
  ASSERT_EQ(rdma_get_send_comp(id, &wc), 1);
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS);
  server.join();
  rdma_disconnect(id);
  rdma_dereg_mr(mr);
  rdma_destroy_ep(id);
  rdma_destroy_ep(listen_id);
}

}  // namespace

// rdma_get_devices hands out the library's own contexts, as rdma-core does:
// they stay open after rdma_free_devices (which frees the array only) and
// are the contexts ids bind to. libfabric's verbs provider frees the array
// and goes on registering memory on them (it was killed by SIGSEGV in
// ibv_reg_mr_iova2 when the array owned its contexts).
TEST(CmDevices, ContextsOutliveTheArrayAndAreTheIdsOwn) {
  int count = -1;
  ibv_context** list = rdma_get_devices(&count);
  ASSERT_NE(list, nullptr) << strerror(errno);
  ASSERT_GE(count, 1);
  EXPECT_EQ(list[count], nullptr);
  ibv_context* context = list[0];
  rdma_free_devices(list);

  ibv_pd* pd = ibv_alloc_pd(context);
  ASSERT_NE(pd, nullptr) << strerror(errno);
  std::vector<char> buffer(4096);
  ibv_mr* mr = ibv_reg_mr(pd, buffer.data(), buffer.size(), IBV_ACCESS_LOCAL_WRITE);
  ASSERT_NE(mr, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_dereg_mr(mr), 0);
  EXPECT_EQ(ibv_dealloc_pd(pd), 0);

  ibv_context** again = rdma_get_devices(nullptr);
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(again[0], context) << "a second call must give the same contexts";
  rdma_free_devices(again);

  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  attach_device(ch, id);
  EXPECT_EQ(id->verbs, context) << "an id's device is the context rdma_get_devices gave";
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

// Binding to a loopback address succeeds without a device, as the classic
// rdma_cm does (id->verbs NULL; a modern kernel refuses with ENODEV, and
// nothing can rely on a device there). libfabric's verbs provider binds
// "localhost" when given no address and advertises the device's own
// addresses only when id->verbs is NULL; with 127.0.0.1 advertised, MPI over
// verbs;ofi_rxm between two hosts hung. A listener there still accepts
// (each request's id gets the device), and resolving from it takes the
// loopback address's GID.
TEST(CmBind, LoopbackBindsWithoutADevice) {
  Listener listener;
  EXPECT_EQ(listener.id->verbs, nullptr);
  Client client(listener.port);
  ASSERT_NE(client.id->verbs, nullptr);
  ibv_qp_init_attr attr = small_qp();
  ASSERT_EQ(rdma_create_qp(client.id, nullptr, &attr), 0);
  rdma_conn_param param{};
  param.responder_resources = param.initiator_depth = 1;
  ASSERT_EQ(rdma_connect(client.id, &param), 0);
  rdma_cm_event* req = expect_event(listener.ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  ASSERT_NE(req, nullptr);
  EXPECT_EQ(req->id->verbs, client.id->verbs) << "the request's id has the device";
  rdma_cm_id* child = req->id;
  rdma_reject(child, nullptr, 0);
  rdma_ack_cm_event(req);
  rdma_destroy_id(child);
  ack_expected(client.ch, RDMA_CM_EVENT_REJECTED);

  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* id = nullptr;
  ASSERT_EQ(rdma_create_id(ch, &id, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in src = loopback(0);
  ASSERT_EQ(rdma_bind_addr(id, reinterpret_cast<sockaddr*>(&src)), 0);
  EXPECT_EQ(id->verbs, nullptr);
  EXPECT_EQ(rdma_create_qp(id, nullptr, &attr), -1) << "no device yet";
  sockaddr_in dst = loopback(7);
  ASSERT_EQ(rdma_resolve_addr(id, nullptr, reinterpret_cast<sockaddr*>(&dst), 2000), 0);
  ack_expected(ch, RDMA_CM_EVENT_ADDR_RESOLVED);
  ASSERT_NE(id->verbs, nullptr);
  ibv_gid want{};
  want.raw[10] = want.raw[11] = 0xff;
  want.raw[12] = 127;
  want.raw[15] = 1;
  EXPECT_EQ(std::memcmp(id->route.addr.addr.ibaddr.sgid.raw, want.raw, 16), 0) << "the bound address's GID";
  rdma_destroy_id(id);
  rdma_destroy_event_channel(ch);
}

namespace {

int open_fds() {
  int n = 0;
  for (int fd = 0; fd < 65536; ++fd)
    if (fcntl(fd, F_GETFD) != -1) ++n;
  return n;
}

// The listener's next request, accepted with a QP (on `cq`, or on CQs
// rdma_create_qp makes); the child id.
rdma_cm_id* accept_next(rdma_event_channel* listen_ch, ibv_cq* cq = nullptr) {
  rdma_cm_event* req = expect_event(listen_ch, RDMA_CM_EVENT_CONNECT_REQUEST);
  if (!req) return nullptr;
  rdma_cm_id* child = req->id;
  rdma_ack_cm_event(req);
  ibv_qp_init_attr attr = small_qp();
  attr.send_cq = attr.recv_cq = cq;
  EXPECT_EQ(rdma_create_qp(child, nullptr, &attr), 0);
  EXPECT_EQ(rdma_accept(child, nullptr), 0);
  return child;
}

}  // namespace

// The ids of one process reach another's listener over one link (cm_link.h),
// so connections cost no descriptor each: cmtime's 1000 connections failed
// at the default 1024 open files when each id held its own socket.
TEST(CmLinks, ConnectionsHoldNoDescriptorEach) {
  Listener listener;
  rdma_event_channel* ch = rdma_create_event_channel();
  constexpr int kConnections = 200;
  std::vector<rdma_cm_id*> clients, children;
  rdma_cm_id* first = resolved_id(ch, listener.port);  // the link, the device's fds
  // One CQ for all: rdma_create_qp would give each QP completion channels
  // of its own, an fd each, as rdma-core's does.
  ibv_cq* cq = ibv_create_cq(first->verbs, 4 * 2 * kConnections, nullptr, nullptr, 0);
  ASSERT_NE(cq, nullptr);
  ibv_qp_init_attr attr = small_qp();
  attr.send_cq = attr.recv_cq = cq;
  ASSERT_EQ(rdma_create_qp(first, nullptr, &attr), 0);
  ASSERT_EQ(rdma_connect(first, nullptr), 0);
  children.push_back(accept_next(listener.ch, cq));
  ack_expected(ch, RDMA_CM_EVENT_ESTABLISHED);
  ack_expected(listener.ch, RDMA_CM_EVENT_ESTABLISHED);
  clients.push_back(first);
  const int before = open_fds();
  for (int i = 1; i < kConnections; ++i) {
    rdma_cm_id* id = resolved_id(ch, listener.port);
    ASSERT_EQ(rdma_create_qp(id, nullptr, &attr), 0);
    ASSERT_EQ(rdma_connect(id, nullptr), 0);
    clients.push_back(id);
    children.push_back(accept_next(listener.ch, cq));
    ack_expected(ch, RDMA_CM_EVENT_ESTABLISHED);
    ack_expected(listener.ch, RDMA_CM_EVENT_ESTABLISHED);
  }
  EXPECT_LT(open_fds() - before, 8) << "descriptors for " << kConnections - 1 << " more connections";
  for (rdma_cm_id* id : clients) {
    rdma_destroy_qp(id);
    rdma_destroy_id(id);
  }
  std::set<rdma_cm_id*> disconnected;  // each child hears its peer go, in any order
  for (size_t i = 0; i < children.size(); ++i) {
    rdma_cm_event* ev = expect_event(listener.ch, RDMA_CM_EVENT_DISCONNECTED);
    if (!ev) break;
    disconnected.insert(ev->id);
    rdma_ack_cm_event(ev);
  }
  EXPECT_EQ(disconnected, std::set<rdma_cm_id*>(children.begin(), children.end()));
  for (rdma_cm_id* id : children) {
    rdma_destroy_qp(id);
    rdma_destroy_id(id);
  }
  ibv_destroy_cq(cq);
  rdma_destroy_event_channel(ch);
}

// Ids on two channels share the link; each hears only its own peer: a
// child destroyed without a DREQ disconnects its client, not the other.
TEST(CmLinks, EachIdOnASharedLinkHearsOnlyItsOwnPeer) {
  Listener listener;
  rdma_event_channel* ch_a = rdma_create_event_channel();
  rdma_event_channel* ch_b = rdma_create_event_channel();
  rdma_cm_id* a = resolved_id(ch_a, listener.port);
  rdma_cm_id* b = resolved_id(ch_b, listener.port);
  ibv_qp_init_attr attr = small_qp();
  ASSERT_EQ(rdma_create_qp(a, nullptr, &attr), 0);
  ASSERT_EQ(rdma_create_qp(b, nullptr, &attr), 0);
  ASSERT_EQ(rdma_connect(a, nullptr), 0);
  rdma_cm_id* child_a = accept_next(listener.ch);
  ASSERT_EQ(rdma_connect(b, nullptr), 0);
  rdma_cm_id* child_b = accept_next(listener.ch);
  ack_expected(ch_a, RDMA_CM_EVENT_ESTABLISHED);
  ack_expected(ch_b, RDMA_CM_EVENT_ESTABLISHED);
  ack_expected(listener.ch, RDMA_CM_EVENT_ESTABLISHED);
  ack_expected(listener.ch, RDMA_CM_EVENT_ESTABLISHED);

  rdma_destroy_qp(child_a);
  ASSERT_EQ(rdma_destroy_id(child_a), 0);  // as the kernel: a DREQ goes
  ack_expected(ch_a, RDMA_CM_EVENT_DISCONNECTED);
  if (rdma_cm_event* ev = event_within(ch_b, 200)) {
    ADD_FAILURE() << "b heard " << rdma_event_str(ev->event);
    rdma_ack_cm_event(ev);
  }
  EXPECT_EQ(qp_state(b->qp), IBV_QPS_RTS);
  ASSERT_EQ(rdma_disconnect(b), 0);
  ack_expected(ch_b, RDMA_CM_EVENT_DISCONNECTED);
  ack_expected(listener.ch, RDMA_CM_EVENT_DISCONNECTED);
  for (rdma_cm_id* id : {a, b, child_b}) {
    rdma_destroy_qp(id);
    rdma_destroy_id(id);
  }
  rdma_destroy_event_channel(ch_a);
  rdma_destroy_event_channel(ch_b);
}

// A listener closed and opened again on its port (perftest's server does,
// between its phases): the next connect reaches the new one, not the link
// to the old one, which takes no more requests.
TEST(CmLinks, AListenerOpenedAgainOnItsPortGetsTheNextRequest) {
  auto first = std::make_unique<Listener>();
  const uint16_t port = first->port;
  rdma_event_channel* ch = rdma_create_event_channel();
  rdma_cm_id* a = resolved_id(ch, port);
  ibv_qp_init_attr attr = small_qp();
  ASSERT_EQ(rdma_create_qp(a, nullptr, &attr), 0);
  ASSERT_EQ(rdma_connect(a, nullptr), 0);
  rdma_cm_id* child_a = accept_next(first->ch);
  ack_expected(ch, RDMA_CM_EVENT_ESTABLISHED);
  ack_expected(first->ch, RDMA_CM_EVENT_ESTABLISHED);
  rdma_destroy_qp(child_a);
  rdma_destroy_id(child_a);
  ack_expected(ch, RDMA_CM_EVENT_DISCONNECTED);
  first.reset();  // the listener goes; `a` keeps the link open meanwhile

  rdma_event_channel* listen_ch = rdma_create_event_channel();
  rdma_cm_id* second = nullptr;
  ASSERT_EQ(rdma_create_id(listen_ch, &second, nullptr, RDMA_PS_TCP), 0);
  sockaddr_in addr = loopback(port);
  ASSERT_EQ(rdma_bind_addr(second, reinterpret_cast<sockaddr*>(&addr)), 0);
  ASSERT_EQ(rdma_listen(second, 8), 0);
  rdma_cm_id* b = resolved_id(ch, port);
  ASSERT_EQ(rdma_create_qp(b, nullptr, &attr), 0);
  ASSERT_EQ(rdma_connect(b, nullptr), 0);
  // Nobody pumps the old listener's channel any more: the request reaches
  // the new listener, sent again over a new link if it went over the old.
  rdma_cm_id* child_b = accept_next(listen_ch);
  ASSERT_NE(child_b, nullptr);
  ack_expected(ch, RDMA_CM_EVENT_ESTABLISHED);
  ack_expected(listen_ch, RDMA_CM_EVENT_ESTABLISHED);
  for (rdma_cm_id* id : {a, b, child_b}) {
    rdma_destroy_qp(id);
    rdma_destroy_id(id);
  }
  rdma_destroy_id(second);
  rdma_destroy_event_channel(listen_ch);
  rdma_destroy_event_channel(ch);
}
