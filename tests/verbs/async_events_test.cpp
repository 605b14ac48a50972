// The async events a device raises on the responder's side: the target's
// owner sees them on its context's async fd.
#include <gtest/gtest.h>
#include <poll.h>

#include "verbs_fixture.h"

using namespace svtest;

namespace {

// The next async event within `ms`, acked; event_type -1 if none.
struct Event {
  int type = -1;
  ibv_qp* qp = nullptr;
};

Event next_event(ibv_context* ctx, int ms = 1000) {
  pollfd p{ctx->async_fd, POLLIN, 0};
  if (poll(&p, 1, ms) != 1) return {};
  ibv_async_event ev;
  if (ibv_get_async_event(ctx, &ev)) return {};
  Event out{ev.event_type, ev.element.qp};
  ibv_ack_async_event(&ev);
  return out;
}

ibv_wc_status send_one(ibv_qp* qp, ibv_cq* cq, const Buffer& buf, ibv_wr_opcode op = IBV_WR_SEND,
                       uint64_t remote = 0, uint32_t rkey = 0) {
  ibv_sge s = buf.sge(0, 8);
  ibv_send_wr wr{};
  wr.sg_list = &s;
  wr.num_sge = 1;
  wr.opcode = op;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  wr.wr.atomic.remote_addr = remote;
  wr.wr.atomic.rkey = rkey;
  return post_and_wait(qp, cq, wr);
}

void post_receive(ibv_qp* qp, const Buffer& buf) {
  ibv_sge s = buf.sge(0, 64);
  ibv_recv_wr wr{};
  wr.sg_list = &s;
  wr.num_sge = 1;
  ibv_recv_wr* bad;
  ASSERT_EQ(ibv_post_recv(qp, &wr, &bad), 0);
}

}  // namespace

TEST(AsyncEvents, CommunicationEstablishedOnceForAQpInRtr) {
  Device dev;
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ibv_qp* a = create_rc_qp(dev.pd, cq);
  ibv_qp* b = create_rc_qp(dev.pd, cq);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(connect_qp(a, b->qp_num), 0);
  ASSERT_EQ(to_init(b), 0);
  ASSERT_EQ(to_rtr(b, a->qp_num), 0);  // b stays in RTR
  Buffer buf(dev.pd, 4096);
  post_receive(b, buf);
  post_receive(b, buf);
  EXPECT_EQ(send_one(a, cq, buf), IBV_WC_SUCCESS);
  Event e = next_event(dev.ctx);
  EXPECT_EQ(e.type, IBV_EVENT_COMM_EST);
  EXPECT_EQ(e.qp, b);
  EXPECT_EQ(send_one(a, cq, buf), IBV_WC_SUCCESS);
  EXPECT_EQ(next_event(dev.ctx, 100).type, -1) << "raised twice";
  ibv_destroy_qp(a);
  ibv_destroy_qp(b);
  ibv_destroy_cq(cq);
}

TEST(AsyncEvents, LastWqeReachedWhenASrqQpEntersError) {
  Device dev;
  ibv_srq* srq = create_srq(dev.pd, 8);
  ASSERT_NE(srq, nullptr);
  {
    QpPair p(dev, IBV_QPT_RC, 16, srq);
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(ibv_modify_qp(p.b, &a, IBV_QP_STATE), 0);
    Event e = next_event(dev.ctx);
    EXPECT_EQ(e.type, IBV_EVENT_QP_LAST_WQE_REACHED);
    EXPECT_EQ(e.qp, p.b);
    // ERR -> ERR is a legal transition and no new entry into ERR: UCX moves
    // a QP that a peer's disconnect already errored to ERR again, then
    // waits for this event, and aborts (an assertion) if it comes twice.
    ASSERT_EQ(ibv_modify_qp(p.b, &a, IBV_QP_STATE), 0);
    EXPECT_EQ(next_event(dev.ctx, 100).type, -1) << "raised again for ERR -> ERR";
    // Brought back up, the QP may enter ERR again, and the event comes again.
    a.qp_state = IBV_QPS_RESET;
    ASSERT_EQ(ibv_modify_qp(p.b, &a, IBV_QP_STATE), 0);
    ASSERT_EQ(to_init(p.b), 0);
    a.qp_state = IBV_QPS_ERR;
    ASSERT_EQ(ibv_modify_qp(p.b, &a, IBV_QP_STATE), 0);
    EXPECT_EQ(next_event(dev.ctx).type, IBV_EVENT_QP_LAST_WQE_REACHED);
  }
  ibv_destroy_srq(srq);
}

TEST(AsyncEvents, ResponderSeesAccessAndRequestErrors) {
  struct Case {
    const char* name;
    ibv_wr_opcode op;
    int target_access;
    uint64_t offset;
    ibv_wc_status requester;
    ibv_event_type responder;
  } cases[] = {
      {"write_without_remote_write", IBV_WR_RDMA_WRITE, IBV_ACCESS_LOCAL_WRITE, 0, IBV_WC_REM_ACCESS_ERR,
       IBV_EVENT_QP_ACCESS_ERR},
      {"read_out_of_bounds", IBV_WR_RDMA_READ, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, 4096,
       IBV_WC_REM_ACCESS_ERR, IBV_EVENT_QP_ACCESS_ERR},
      {"misaligned_atomic", IBV_WR_ATOMIC_FETCH_AND_ADD, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC, 3,
       IBV_WC_REM_INV_REQ_ERR, IBV_EVENT_QP_REQ_ERR},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Device dev;
    QpPair p(dev, IBV_QPT_RC);
    Buffer target(dev.pd, 4096, c.target_access), local(dev.pd, 64);
    EXPECT_EQ(send_one(p.a, p.cq_a, local, c.op, target.addr() + c.offset, target.mr->rkey), c.requester);
    Event e = next_event(dev.ctx);
    EXPECT_EQ(e.type, c.responder);
    EXPECT_EQ(e.qp, p.b);
    // The responder's QP is in the error state too.
    ibv_qp_attr a;
    ibv_qp_init_attr ia;
    ASSERT_EQ(ibv_query_qp(p.b, &a, IBV_QP_STATE, &ia), 0);
    EXPECT_EQ(a.qp_state, IBV_QPS_ERR);
  }
}
