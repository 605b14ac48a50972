// XRC: domains shared through a file (ibv_open_xrcd), XRC SRQs, XRC_SEND and
// XRC_RECV QPs, ibv_open_qp, and the remote SRQ number of both post APIs.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "sanitizers.h"
#include "verbs_fixture.h"
#include "verbs_test_util.h"

using namespace svtest;
using namespace svtest::util;

namespace {

// A file that names a domain, removed at the end.
struct DomainFile {
  std::string path;
  int fd = -1;
  DomainFile() {
    char name[] = "/tmp/softverbs-xrcd-XXXXXX";
    fd = mkstemp(name);
    path = name;
  }
  ~DomainFile() {
    close(fd);
    unlink(path.c_str());
  }
};

ibv_xrcd* open_domain(ibv_context* ctx, int fd, int oflags) {
  ibv_xrcd_init_attr a{};
  a.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
  a.fd = fd;
  a.oflags = oflags;
  return ibv_open_xrcd(ctx, &a);
}

ibv_srq* xrc_srq(Device& dev, ibv_xrcd* xrcd, ibv_cq* cq) {
  ibv_srq_init_attr_ex a{};
  a.attr.max_wr = 16;
  a.attr.max_sge = 1;
  a.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_XRCD | IBV_SRQ_INIT_ATTR_CQ | IBV_SRQ_INIT_ATTR_PD;
  a.srq_type = IBV_SRQT_XRC;
  a.xrcd = xrcd;
  a.cq = cq;
  a.pd = dev.pd;
  return ibv_create_srq_ex(dev.ctx, &a);
}

ibv_qp* xrc_recv_qp(Device& dev, ibv_xrcd* xrcd) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_XRC_RECV;
  a.comp_mask = IBV_QP_INIT_ATTR_XRCD;
  a.xrcd = xrcd;
  return ibv_create_qp_ex(dev.ctx, &a);
}

ibv_qp* xrc_send_qp(Device& dev, ibv_cq* cq, uint64_t send_ops = 0) {
  ibv_qp_init_attr_ex a{};
  a.qp_type = IBV_QPT_XRC_SEND;
  a.send_cq = cq;
  a.cap.max_send_wr = 16;
  a.cap.max_send_sge = 1;
  a.comp_mask = IBV_QP_INIT_ATTR_PD | (send_ops ? IBV_QP_INIT_ATTR_SEND_OPS_FLAGS : 0);
  a.pd = dev.pd;
  a.send_ops_flags = send_ops;
  return ibv_create_qp_ex(dev.ctx, &a);
}

// The masks of xsrq_pingpong: XRC_RECV to RTS with TIMEOUT | SQ_PSN,
// XRC_SEND with the initiator's set.
int connect_xrc(ibv_context* ctx, ibv_qp* recv, ibv_qp* send) {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  const int init = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
  if (int e = ibv_modify_qp(recv, &a, init)) return e;
  a.qp_access_flags = 0;
  if (int e = ibv_modify_qp(send, &a, init)) return e;
  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = IBV_MTU_1024;
  a.ah_attr.is_global = 1;
  a.ah_attr.port_num = 1;
  a.ah_attr.grh.hop_limit = 1;
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(loopback_gid_index(ctx));
  ibv_query_gid(ctx, 1, a.ah_attr.grh.sgid_index, &a.ah_attr.grh.dgid);
  a.min_rnr_timer = 12;
  a.max_dest_rd_atomic = 1;  // responder resources for RDMA READ
  a.dest_qp_num = send->qp_num;
  if (int e = ibv_modify_qp(recv, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
    return e;
  a.dest_qp_num = recv->qp_num;
  if (int e = ibv_modify_qp(send, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
    return e;
  ibv_qp_attr r{};
  r.qp_state = IBV_QPS_RTS;
  r.timeout = 14;
  if (int e = ibv_modify_qp(recv, &r, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN)) return e;
  r.retry_cnt = 7;
  r.rnr_retry = 7;
  r.max_rd_atomic = 1;
  return ibv_modify_qp(send, &r,
                       IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                           IBV_QP_MAX_QP_RD_ATOMIC);
}

uint32_t srq_num(ibv_srq* srq) {
  uint32_t n = 0;
  EXPECT_EQ(ibv_get_srq_num(srq, &n), 0);
  return n;
}

ibv_send_wr xrc_wr(ibv_sge* s, ibv_wr_opcode op, uint32_t srqn) {
  ibv_send_wr wr = make_wr(9, s, 1, op);
  wr.qp_type.xrc.remote_srqn = srqn;
  return wr;
}

}  // namespace

TEST(Xrc, DomainsFollowTheOpenXrcdManPage) {
  Device dev;
  ibv_device_attr attr{};
  ASSERT_EQ(ibv_query_device(dev.ctx, &attr), 0);
  EXPECT_TRUE(attr.device_cap_flags & IBV_DEVICE_XRC);
  DomainFile file;
  errno = 0;
  EXPECT_EQ(open_domain(dev.ctx, file.fd, 0), nullptr);  // none yet and no O_CREAT
  EXPECT_EQ(errno, EINVAL);
  ibv_xrcd* a = open_domain(dev.ctx, file.fd, O_CREAT);
  ASSERT_NE(a, nullptr) << strerror(errno);
  ibv_xrcd* b = open_domain(dev.ctx, file.fd, 0);  // exists now
  ASSERT_NE(b, nullptr);
  errno = 0;
  EXPECT_EQ(open_domain(dev.ctx, file.fd, O_CREAT | O_EXCL), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_xrcd* anon = open_domain(dev.ctx, -1, 0);  // no file: a domain of its own
  ASSERT_NE(anon, nullptr);
  ibv_xrcd_init_attr missing{};
  missing.comp_mask = IBV_XRCD_INIT_ATTR_FD;
  missing.fd = -1;
  errno = 0;
  EXPECT_EQ(ibv_open_xrcd(dev.ctx, &missing), nullptr);
  EXPECT_EQ(errno, EINVAL);
  // A domain in use by an SRQ cannot be closed.
  ibv_cq* cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ibv_srq* srq = xrc_srq(dev, a, cq);
  ASSERT_NE(srq, nullptr) << strerror(errno);
  EXPECT_EQ(ibv_close_xrcd(a), EBUSY);
  EXPECT_EQ(ibv_destroy_srq(srq), 0);
  EXPECT_EQ(ibv_close_xrcd(a), 0);
  EXPECT_EQ(ibv_close_xrcd(b), 0);
  EXPECT_EQ(ibv_close_xrcd(anon), 0);
  // Closed by all: it is gone, and opening without O_CREAT fails again.
  errno = 0;
  EXPECT_EQ(open_domain(dev.ctx, file.fd, 0), nullptr);
  EXPECT_EQ(errno, EINVAL);
  ibv_destroy_cq(cq);
}

TEST(Xrc, SendsAndRdmaReachTheSrqTheSenderNames) {
  Device dev;
  ibv_xrcd* xrcd = open_domain(dev.ctx, -1, 0);
  ASSERT_NE(xrcd, nullptr);
  ibv_cq* srq_cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ibv_cq* send_cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ibv_srq* srq1 = xrc_srq(dev, xrcd, srq_cq);
  ibv_srq* srq2 = xrc_srq(dev, xrcd, srq_cq);
  ibv_qp* recv = xrc_recv_qp(dev, xrcd);
  ibv_qp* send = xrc_send_qp(dev, send_cq);
  ASSERT_NE(srq1, nullptr);
  ASSERT_NE(srq2, nullptr);
  ASSERT_NE(recv, nullptr) << strerror(errno);
  ASSERT_NE(send, nullptr) << strerror(errno);
  EXPECT_EQ(recv->qp_type, IBV_QPT_XRC_RECV);
  EXPECT_EQ(recv->pd, nullptr);
  EXPECT_EQ(recv->send_cq, nullptr);
  ASSERT_EQ(connect_xrc(dev.ctx, recv, send), 0);
  EXPECT_NE(srq_num(srq1), srq_num(srq2));

  Buffer src(dev.pd, 4096), in1(dev.pd, 4096), in2(dev.pd, 4096), target(dev.pd, 4096);
  fill_pattern(src.bytes.data(), 4096, 5);
  ASSERT_EQ(post_srq_recv(srq1, 101, in1.sge(0, 4096)), 0);
  ASSERT_EQ(post_srq_recv(srq2, 202, in2.sge(0, 4096)), 0);
  ibv_sge s = src.sge(0, 700);
  // One connection, two SRQs: each message goes where it says.
  ASSERT_EQ(post_and_wait(send, send_cq, xrc_wr(&s, IBV_WR_SEND, srq_num(srq2))), IBV_WC_SUCCESS);
  auto wc = wait_wc(srq_cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(wc[0].wr_id, 202u);
  EXPECT_EQ(wc[0].byte_len, 700u);
  EXPECT_EQ(wc[0].src_qp, send->qp_num);
  EXPECT_TRUE(has_pattern(in2.bytes.data(), 700, 5));
  ASSERT_EQ(post_and_wait(send, send_cq, xrc_wr(&s, IBV_WR_SEND, srq_num(srq1))), IBV_WC_SUCCESS);
  wc = wait_wc(srq_cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 101u);
  // RDMA WRITE and READ: keys of the SRQ's PD.
  ibv_send_wr w = xrc_wr(&s, IBV_WR_RDMA_WRITE, srq_num(srq1));
  w.wr.rdma.remote_addr = target.addr() + 10;
  w.wr.rdma.rkey = target.mr->rkey;
  ASSERT_EQ(post_and_wait(send, send_cq, w), IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(target.bytes.data() + 10, 700, 5));
  Buffer back(dev.pd, 4096);
  ibv_sge b = back.sge(0, 700);
  w = xrc_wr(&b, IBV_WR_RDMA_READ, srq_num(srq1));
  w.wr.rdma.remote_addr = target.addr() + 10;
  w.wr.rdma.rkey = target.mr->rkey;
  ASSERT_EQ(post_and_wait(send, send_cq, w), IBV_WC_SUCCESS);
  EXPECT_TRUE(has_pattern(back.bytes.data(), 700, 5));

  // XRC QPs have no receive queue; the receive side sends nothing.
  ibv_recv_wr rwr{};
  ibv_recv_wr* rbad;
  EXPECT_EQ(ibv_post_recv(send, &rwr, &rbad), EINVAL);
  EXPECT_EQ(ibv_post_recv(recv, &rwr, &rbad), EINVAL);
  ibv_send_wr* sbad;
  ibv_send_wr any = xrc_wr(&s, IBV_WR_SEND, srq_num(srq1));
  EXPECT_EQ(ibv_post_send(recv, &any, &sbad), EINVAL);

  // An SRQ of another domain: the request is invalid.
  ibv_xrcd* other = open_domain(dev.ctx, -1, 0);
  ibv_srq* foreign = xrc_srq(dev, other, srq_cq);
  ASSERT_NE(foreign, nullptr);
  ASSERT_EQ(post_srq_recv(foreign, 303, in1.sge(0, 4096)), 0);
  EXPECT_EQ(post_and_wait(send, send_cq, xrc_wr(&s, IBV_WR_SEND, srq_num(foreign))), IBV_WC_REM_INV_REQ_ERR);
  EXPECT_TRUE(drain(srq_cq).empty());

  EXPECT_EQ(ibv_destroy_qp(send), 0);
  EXPECT_EQ(ibv_destroy_qp(recv), 0);
  for (ibv_srq* q : {srq1, srq2, foreign}) EXPECT_EQ(ibv_destroy_srq(q), 0);
  EXPECT_EQ(ibv_close_xrcd(xrcd), 0);
  EXPECT_EQ(ibv_close_xrcd(other), 0);
  ibv_destroy_cq(srq_cq);
  ibv_destroy_cq(send_cq);
}

TEST(Xrc, ExtendedPostApiSetsTheRemoteSrqn) {
  Device dev;
  ibv_xrcd* xrcd = open_domain(dev.ctx, -1, 0);
  ibv_cq* srq_cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ibv_cq* send_cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ibv_srq* srq = xrc_srq(dev, xrcd, srq_cq);
  ibv_qp* recv = xrc_recv_qp(dev, xrcd);
  ibv_qp* send = xrc_send_qp(dev, send_cq, IBV_QP_EX_WITH_SEND);
  ASSERT_NE(send, nullptr) << strerror(errno);
  ASSERT_EQ(connect_xrc(dev.ctx, recv, send), 0);
  Buffer src(dev.pd, 4096), in(dev.pd, 4096);
  fill_pattern(src.bytes.data(), 4096, 6);
  ASSERT_EQ(post_srq_recv(srq, 11, in.sge(0, 4096)), 0);
  ibv_qp_ex* qx = ibv_qp_to_qp_ex(send);
  ASSERT_NE(qx, nullptr);
  ibv_wr_start(qx);
  qx->wr_id = 1;
  qx->wr_flags = IBV_SEND_SIGNALED;
  ibv_wr_send(qx);
  ibv_wr_set_xrc_srqn(qx, srq_num(srq));
  ibv_wr_set_sge(qx, src.mr->lkey, src.addr(), 123);
  ASSERT_EQ(ibv_wr_complete(qx), 0);
  auto wc = wait_wc(srq_cq, 1);
  ASSERT_EQ(wc.size(), 1u);
  EXPECT_EQ(wc[0].wr_id, 11u);
  EXPECT_TRUE(has_pattern(in.bytes.data(), 123, 6));
  EXPECT_EQ(wait_wc(send_cq, 1).size(), 1u);
  ibv_destroy_qp(send);
  ibv_destroy_qp(recv);
  ibv_destroy_srq(srq);
  ibv_close_xrcd(xrcd);
  ibv_destroy_cq(srq_cq);
  ibv_destroy_cq(send_cq);
}

TEST(Xrc, OpenQpGivesAnotherHandleOnAnXrcRecvQp) {
  Device dev;
  ibv_xrcd* xrcd = open_domain(dev.ctx, -1, 0);
  ibv_xrcd* other = open_domain(dev.ctx, -1, 0);
  ibv_qp* recv = xrc_recv_qp(dev, xrcd);
  ASSERT_NE(recv, nullptr);
  ibv_qp_open_attr oa{};
  oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE | IBV_QP_OPEN_ATTR_CONTEXT;
  oa.qp_num = recv->qp_num;
  oa.xrcd = xrcd;
  oa.qp_type = IBV_QPT_XRC_RECV;
  oa.qp_context = &oa;
  ibv_qp* h = ibv_open_qp(dev.ctx, &oa);
  ASSERT_NE(h, nullptr) << strerror(errno);
  EXPECT_EQ(h->qp_num, recv->qp_num);
  EXPECT_EQ(h->qp_context, &oa);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  ASSERT_EQ(ibv_modify_qp(h, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  ibv_qp_attr q{};
  ibv_qp_init_attr qi{};
  ASSERT_EQ(ibv_query_qp(recv, &q, IBV_QP_STATE, &qi), 0);
  EXPECT_EQ(q.qp_state, IBV_QPS_INIT) << "the handle moved the QP itself";
  EXPECT_EQ(ibv_close_xrcd(xrcd), EBUSY);  // the QP and the handle use it
  EXPECT_EQ(ibv_destroy_qp(h), 0);  // closes the handle only
  ASSERT_EQ(ibv_query_qp(recv, &q, IBV_QP_STATE, &qi), 0);
  // Wrong domain, wrong type, missing fields: refused.
  oa.xrcd = other;
  errno = 0;
  EXPECT_EQ(ibv_open_qp(dev.ctx, &oa), nullptr);
  EXPECT_EQ(errno, EINVAL);
  oa.xrcd = xrcd;
  oa.qp_type = IBV_QPT_RC;
  EXPECT_EQ(ibv_open_qp(dev.ctx, &oa), nullptr);
  oa.qp_type = IBV_QPT_XRC_RECV;
  oa.comp_mask = IBV_QP_OPEN_ATTR_NUM;
  EXPECT_EQ(ibv_open_qp(dev.ctx, &oa), nullptr);
  EXPECT_EQ(ibv_destroy_qp(recv), 0);
  EXPECT_EQ(ibv_close_xrcd(xrcd), 0);
  EXPECT_EQ(ibv_close_xrcd(other), 0);
}

// The domain is host-wide: another process opens it through the same file,
// creates an SRQ in it, and receives what arrives at this process's
// XRC_RECV QP for that SRQ; it can also open (and query) that QP.
TEST(Xrc, AnotherProcessOfTheDomainReceivesThroughOurQp) {
  SV_SKIP_IF_FORK_UNSUPPORTED();
  DomainFile file;
  Device dev;
  ibv_xrcd* xrcd = open_domain(dev.ctx, file.fd, O_CREAT);
  ASSERT_NE(xrcd, nullptr);
  ibv_cq* send_cq = ibv_create_cq(dev.ctx, 16, nullptr, nullptr, 0);
  ibv_qp* recv = xrc_recv_qp(dev, xrcd);
  ibv_qp* send = xrc_send_qp(dev, send_cq);
  ASSERT_EQ(connect_xrc(dev.ctx, recv, send), 0);
  int up[2], down[2];
  ASSERT_EQ(pipe(up), 0);
  ASSERT_EQ(pipe(down), 0);
  const uint32_t recv_qpn = recv->qp_num;
  pid_t pid = fork();
  if (pid == 0) {
    alarm(30);
    Device cdev;
    ibv_xrcd* cx = open_domain(cdev.ctx, file.fd, 0);  // exists: the parent holds it
    if (!cx) _exit(2);
    ibv_cq* cq = ibv_create_cq(cdev.ctx, 16, nullptr, nullptr, 0);
    ibv_srq* srq = xrc_srq(cdev, cx, cq);
    if (!srq) _exit(3);
    Buffer in(cdev.pd, 4096);
    if (post_srq_recv(srq, 77, in.sge(0, 4096))) _exit(4);
    ibv_qp_open_attr oa{};
    oa.comp_mask = IBV_QP_OPEN_ATTR_NUM | IBV_QP_OPEN_ATTR_XRCD | IBV_QP_OPEN_ATTR_TYPE;
    oa.qp_num = recv_qpn;
    oa.xrcd = cx;
    oa.qp_type = IBV_QPT_XRC_RECV;
    ibv_qp* h = ibv_open_qp(cdev.ctx, &oa);
    if (!h) _exit(5);
    ibv_qp_attr q{};
    ibv_qp_init_attr qi{};
    if (ibv_query_qp(h, &q, IBV_QP_STATE, &qi) || q.qp_state != IBV_QPS_RTS) _exit(6);
    uint32_t n = srq_num(srq);
    if (write(up[1], &n, 4) != 4) _exit(7);
    auto wc = wait_wc(cq, 1, 10000);
    if (wc.size() != 1 || wc[0].status != IBV_WC_SUCCESS || wc[0].wr_id != 77 || !has_pattern(in.bytes.data(), 500, 8))
      _exit(8);
    ibv_destroy_qp(h);
    char done = 1;
    _exit(write(up[1], &done, 1) == 1 ? 0 : 9);
  }
  uint32_t child_srqn = 0;
  ASSERT_EQ(read(up[0], &child_srqn, 4), 4);
  Buffer src(dev.pd, 4096);
  fill_pattern(src.bytes.data(), 4096, 8);
  ibv_sge s = src.sge(0, 500);
  EXPECT_EQ(post_and_wait(send, send_cq, xrc_wr(&s, IBV_WR_SEND, child_srqn)), IBV_WC_SUCCESS);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  ibv_destroy_qp(send);
  ibv_destroy_qp(recv);
  ibv_close_xrcd(xrcd);
  ibv_destroy_cq(send_cq);
  for (int fd : {up[0], up[1], down[0], down[1]}) close(fd);
}
